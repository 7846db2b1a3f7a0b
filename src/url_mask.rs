//! Masking the userinfo of every URL in a text. Repository and proxy URLs may carry a
//! password (`https://user:pass@host/`) or a token as the user (`https://TOKEN@host/`); such a
//! URL may reach a plan, an event, an error or a result. The whole userinfo is masked, the user
//! name too, because a token is often written there. Pure: unit-tested.

use std::borrow::Cow;

use crate::mask::MASK;

/// `text` with the userinfo of every `scheme://userinfo@host` masked. When a URL's text is
/// ambiguous (an `@` later in its path), more is masked rather than less.
pub fn mask_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(|c: char| c.is_whitespace() || "'\"<>`".contains(c)).unwrap_or(tail.len());
        let word = &tail[..end];
        match word.rfind('@') {
            Some(at) if at > 0 => {
                out.push_str(MASK);
                out.push_str(&word[at..]);
            }
            _ => out.push_str(word),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_masked_wherever_a_url_sits() {
        let cases = [
            ("https://user:s3cret@charts.example/x", "https://********@charts.example/x"),
            ("http://tok3n@10.0.0.1:3128", "http://********@10.0.0.1:3128"),
            (
                "repo 'https://a:b@h/' added; also oci://u:p@reg/c",
                "repo 'https://********@h/' added; also oci://********@reg/c",
            ),
            ("http://u:p/ss@host/path@x y", "http://********@x y"),
            ("https://charts.example/x", "https://charts.example/x"),
            ("mail me@example.com", "mail me@example.com"),
            ("http://@host/", "http://@host/"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(mask_userinfo(text), want, "{text}");
        }
    }

    #[test]
    fn a_text_without_urls_is_not_copied() {
        assert!(matches!(mask_userinfo("plain text @ 3"), Cow::Borrowed(_)));
    }
}
