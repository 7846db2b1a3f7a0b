#!/bin/sh
# upload_stream.sh: write stdin to a new private file (mode 0600), the upload's fallback when
# the node has no SFTP server. upload_finalize.sh then verifies it and moves it into place.
#
# Usage: upload_stream.sh TMP  (stdin: the content)
#   TMP  the temporary file to write
# Exit status: 0 written; non-zero the file could not be written.

umask 077
cat >"$1"
