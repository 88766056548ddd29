//! What the local platform servers (`bot_api`, `graph_api`, `slack_api`,
//! `discord_api`) share, a module beside them in the tests and the benches
//! (`host/benches/common/mod.rs` includes it by path): a free loopback
//! port, an app served on it, their state's lock, the waits the tests poll
//! them with, and the names they are written with.

use std::fmt::{Debug, Display};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// A listener on a free loopback port, and its `127.0.0.1:PORT`.
pub async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    (listener, addr)
}

/// Serves `app` on `listener` in the background.
pub fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
}

/// Serves `app` on a free loopback port; its `http://127.0.0.1:PORT`.
pub async fn serve_app(app: axum::Router) -> String {
    let (listener, addr) = listen().await;
    serve(listener, app);
    format!("http://{addr}")
}

/// A server's state, poisoned or not: an assertion that failed in a
/// handler must not hide what the state holds.
pub fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls until `ok` (at most `secs`); fails saying `what` otherwise.
pub async fn wait_until(secs: u64, ok: impl Fn() -> bool, what: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls what `chat` was sent (`sent_to`) until it holds `n` messages (at
/// most `secs`); those messages.
pub async fn wait_sent<T: Debug>(
    chat: impl Display,
    n: usize,
    secs: u64,
    sent_to: impl Fn() -> Vec<T>,
) -> Vec<T> {
    let what = || {
        let sent = sent_to();
        format!("{chat} was sent {} of {n}: {sent:?}", sent.len())
    };
    wait_until(secs, || sent_to().len() >= n, what).await;
    sent_to()
}

/// What the local servers are written with.
#[allow(unused_imports)] // each server uses a part of it
pub mod prelude {
    pub use std::collections::VecDeque;
    pub use std::sync::{Arc, Mutex};
    pub use std::time::{Duration, Instant};

    pub use axum::Router;
    pub use axum::extract::State;
    pub use axum::http::{HeaderMap, StatusCode};
    pub use axum::response::{IntoResponse, Response};
    pub use axum::routing::{get, post};
    pub use serde_json::{Value, json};
}
