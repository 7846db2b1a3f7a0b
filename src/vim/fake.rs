//! A scripted [`Http`]: answers by URL prefix (the longest that matches), and records every request (with its secrets
//! still masked in `Debug`) so a test can count round trips and check what went out.

use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::secret::Secret;
use crate::vim::http::{Http, Request, Response};

#[derive(Default)]
pub struct Fake {
    /// (URL prefix, status, X-Subject-Token, body).
    answers: Vec<(String, u16, Option<String>, Vec<u8>)>,
    pub sent: Mutex<Vec<Request>>,
}

impl Fake {
    pub fn answer(mut self, url_prefix: &str, status: u16, token: Option<&str>, body: impl Into<Vec<u8>>) -> Fake {
        self.answers.push((url_prefix.to_string(), status, token.map(str::to_string), body.into()));
        self
    }

    pub fn requests(&self) -> Vec<Request> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Http for Fake {
    fn send(&self, req: &Request) -> Result<Response> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).push(req.clone());
        let matching = self.answers.iter().filter(|(p, ..)| req.url.starts_with(p.as_str()));
        let a = matching.max_by_key(|(p, ..)| p.len()).ok_or_else(|| Error::Connect {
            node: req.service.to_string(),
            addr: req.url.clone(),
            message: "connection refused (fake)".into(),
            attempts: 1,
        })?;
        Ok(Response { status: a.1, subject_token: a.2.as_deref().map(Secret::new), body: a.3.clone() })
    }
}
