"""Unit tests of cloud.py's pure parts (no cloud needed): the auth body, the catalogue lookup on
the real token response saved by selftest.py, and error messages. Standard library only.

    python3 tests/openstack/test_cloud.py
"""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cloud  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(HERE), "data", "openstack")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


class PasswordAuthBody(unittest.TestCase):
    def test_matches_the_saved_request_shape(self):
        body = cloud.password_auth_body("tacker-a", "PASSWORD-PLACEHOLDER", "vnf-a")
        self.assertEqual(body, fixture("keystone-auth-request.json"))

    def test_domains_are_by_name(self):
        body = cloud.password_auth_body("u", "p", "proj", "UD", "PD")
        self.assertEqual(body["auth"]["identity"]["password"]["user"]["domain"], {"name": "UD"})
        self.assertEqual(body["auth"]["scope"]["project"]["domain"], {"name": "PD"})


class CatalogueUrl(unittest.TestCase):
    def setUp(self):
        self.token = fixture("keystone-token.json")["body"]

    def test_network_public_endpoint_of_the_region(self):
        url = cloud.catalogue_url(self.token, "network", "RegionOne")
        self.assertRegex(url, r"^http://127\.0\.0\.1:\d+$")

    def test_identity_endpoint_is_v3(self):
        self.assertTrue(cloud.catalogue_url(self.token, "identity", "RegionOne").endswith("/v3"))

    def test_unknown_region_or_type_is_an_error_naming_them(self):
        with self.assertRaisesRegex(LookupError, "network.*RegionTwo"):
            cloud.catalogue_url(self.token, "network", "RegionTwo")
        with self.assertRaisesRegex(LookupError, "compute"):
            cloud.catalogue_url(self.token, "compute", "RegionOne")

    def test_the_fixtures_hold_no_token_and_no_password(self):
        saved = fixture("keystone-token.json")
        self.assertEqual(saved["headers"]["X-Subject-Token"], "TOKEN-PLACEHOLDER")
        for name in sorted(os.listdir(FIXTURES)):
            with open(os.path.join(FIXTURES, name)) as f:
                text = f.read()
            # selftest.py's tenant passwords; Keystone tokens (fernet) start with gAAAAA.
            for secret in ("pw-tenant-a", "pw-tenant-b", "gAAAAA"):
                self.assertNotIn(secret, text, name)


class ErrorMessage(unittest.TestCase):
    def test_neutron_error(self):
        raw = b'{"NeutronError": {"type": "PortNotFound", "message": "Port x could not be found.", "detail": ""}}'
        self.assertEqual(cloud._message(raw), "Port x could not be found.")

    def test_keystone_error(self):
        raw = b'{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}'
        self.assertEqual(cloud._message(raw), "The request you have made requires authentication.")

    def test_not_json(self):
        self.assertEqual(cloud._message(b"  <html>bad gateway</html>\n"), "<html>bad gateway</html>")

    def test_api_error_names_method_url_status(self):
        e = cloud.ApiError("GET", "http://h/v2.0/ports/x", 404, "Port x could not be found.")
        self.assertEqual(str(e), "GET http://h/v2.0/ports/x: HTTP 404: Port x could not be found.")


if __name__ == "__main__":
    unittest.main()
