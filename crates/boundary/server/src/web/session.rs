//! People signed in to the web inbox: cookie sessions, sign-in rate limits, CSRF tokens, and
//! the refusal a page answers when the caller is not a signed-in person.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use crate::{Caller, Shared};

pub(crate) const COOKIE: &str = "livestate_session";

/// Failed sign-ins allowed per minute (over all clients).
pub(crate) const SIGN_IN_FAILURES_PER_MINUTE: usize = 10;

/// Sessions end after this long.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

pub(crate) struct Session {
    token: String,
    csrf: String,
    started: Instant,
}

/// Signed-in people, and recent failed sign-ins.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    failures: Mutex<VecDeque<Instant>>,
}

impl Sessions {
    /// Whether sign-ins are refused for now: as many failed in the last minute as allowed.
    pub(crate) fn sign_ins_blocked(&self) -> bool {
        let mut failures = self.failures.lock().expect("sessions");
        while failures.front().is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
            failures.pop_front();
        }
        failures.len() >= SIGN_IN_FAILURES_PER_MINUTE
    }

    /// Counts a failed sign-in.
    pub(crate) fn sign_in_failed(&self) {
        self.failures.lock().expect("sessions").push_back(Instant::now());
    }

    /// Starts a session for `token` (a person's); its id, for the cookie.
    pub(crate) fn start(&self, token: String) -> String {
        let id = random_hex(24);
        let session = Session { token, csrf: random_hex(16), started: Instant::now() };
        self.map.lock().expect("sessions").insert(id.clone(), session);
        id
    }

    /// Ends session `id`.
    pub(crate) fn end(&self, id: &str) {
        self.map.lock().expect("sessions").remove(id);
    }
}

pub(crate) fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).expect("the operating system provides randomness");
    crate::auth::hex(&b)
}

pub(crate) fn cookie_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_string())
        })
}

/// Why a page request is turned away.
pub(crate) enum Refused {
    /// No live session: sign in.
    SignIn,
    /// A form without this session's CSRF token.
    StaleForm,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::SignIn => Redirect::to("/signin").into_response(),
            Refused::StaleForm => {
                (StatusCode::FORBIDDEN, "the form is stale or was not sent by this site; reload the page")
                    .into_response()
            }
        }
    }
}

/// The signed-in person of a request and the session's CSRF token, or a redirect to sign in.
pub(crate) fn person(s: &Shared, headers: &HeaderMap) -> Result<(Caller, String), Refused> {
    let to_signin = || Refused::SignIn;
    let id = cookie_of(headers).ok_or_else(to_signin)?;
    let (token, csrf) = {
        let mut map = s.sessions().map.lock().expect("sessions");
        match map.get(&id) {
            Some(sess) if sess.started.elapsed() < SESSION_TTL => (sess.token.clone(), sess.csrf.clone()),
            Some(_) => {
                map.remove(&id);
                return Err(to_signin());
            }
            None => return Err(to_signin()),
        }
    };
    match s.principals().authenticate(Some(&token)) {
        Ok(p) => Ok((Caller(p), csrf)),
        Err(_) => {
            s.sessions().map.lock().expect("sessions").remove(&id);
            Err(to_signin())
        }
    }
}

pub(crate) fn check_csrf(expected: &str, given: &str) -> Result<(), Refused> {
    if !expected.is_empty()
        && expected.len() == given.len()
        && expected.as_bytes().iter().zip(given.as_bytes()).all(|(a, b)| a == b)
    {
        Ok(())
    } else {
        Err(Refused::StaleForm)
    }
}
