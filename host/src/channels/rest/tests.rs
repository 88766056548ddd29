//! The REST client against a real local HTTP server: each way a request
//! ends, and the token in none of what comes back.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;

use super::*;

const TOKEN: &str = "tok-0123456789-secret";

/// A local server: `/ok` answers JSON, `/limited` a 429 that echoes the
/// token, `/slow` never in time, `/empty` a 204; the `Authorization`
/// headers it saw.
async fn server() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = Router::new()
        .route(
            "/ok",
            post(move |h: HeaderMap| async move {
                let auth = h["authorization"].to_str().unwrap_or_default().to_string();
                record.lock().unwrap().push(auth);
                axum::Json(json!({ "id": "7", "echo": ["x", { "k": "v" }] }))
            }),
        )
        .route(
            "/limited",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "1.5")],
                    axum::Json(json!({
                        "message": format!("bad token {TOKEN}"),
                        "nested": [{ (TOKEN): TOKEN }],
                    })),
                )
                    .into_response()
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route("/empty", post(|| async { StatusCode::NO_CONTENT }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn client(timeout: Duration) -> Client {
    Client::new("test", timeout, "Bot", Some("g2-test")).unwrap()
}

fn secret(s: &str) -> Secret {
    Secret(s.into())
}

#[tokio::test]
async fn a_success_answers_its_json_and_the_token_goes_in_the_header() {
    let (url, seen) = server().await;
    let c = client(Duration::from_secs(5));
    let a = c
        .send(c.post(&format!("{url}/ok")), &secret(TOKEN))
        .await
        .unwrap();
    assert_eq!(a.status, 200);
    assert_eq!(a.json["id"], "7");
    assert_eq!(seen.lock().unwrap().as_slice(), [format!("Bot {TOKEN}")]);
    let a = c
        .send(c.post(&format!("{url}/empty")), &secret(TOKEN))
        .await
        .unwrap();
    assert_eq!((a.status, a.json), (204, Value::Null));
}

#[tokio::test]
async fn an_error_status_is_the_answer_with_the_token_cut_out() {
    let (url, _) = server().await;
    let c = client(Duration::from_secs(5));
    let f = c
        .send(c.get(&format!("{url}/limited")), &secret(TOKEN))
        .await
        .unwrap_err();
    let a = match f {
        Failure::Api(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(a.status, 429);
    assert_eq!(a.seconds("retry-after"), Some(Duration::from_millis(1500)));
    assert_eq!(a.json["message"], "bad token [redacted]");
    assert!(!a.json.to_string().contains(TOKEN), "{}", a.json);
    assert!(!format!("{a:?}").contains(TOKEN));
}

#[tokio::test]
async fn no_connection_is_not_sent_and_no_answer_is_unanswered() {
    // A port nobody listens on any more.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let c = client(Duration::from_millis(300));
    let f = c
        .send(c.get(&format!("http://{addr}/{TOKEN}")), &secret(TOKEN))
        .await
        .unwrap_err();
    assert!(matches!(f, Failure::NotSent(_)), "{f:?}");
    assert!(!format!("{f:?}").contains(TOKEN), "{f:?}");
    assert!(matches!(
        f.send_error(|_: Answer| SendError::Rejected("no".into())),
        SendError::Transient(_)
    ));

    let (url, _) = server().await;
    let f = c
        .send(c.get(&format!("{url}/slow")), &secret(TOKEN))
        .await
        .unwrap_err();
    assert!(matches!(f, Failure::Unanswered(_)), "{f:?}");
    assert!(matches!(
        f.send_error(|_: Answer| SendError::Rejected("no".into())),
        SendError::Uncertain(_)
    ));
}

#[tokio::test]
async fn a_token_no_header_can_carry_is_refused_before_sending() {
    let (url, seen) = server().await;
    let c = client(Duration::from_secs(5));
    let bad = "tok\nen-with-a-newline";
    let f = c
        .send(c.post(&format!("{url}/ok")), &secret(bad))
        .await
        .unwrap_err();
    assert!(
        matches!(&f, Failure::NotSent(w) if w.contains("no HTTP header")),
        "{f:?}"
    );
    assert!(!format!("{f:?}").contains("en-with"), "{f:?}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );
}

#[test]
fn the_platforms_reading_replaces_the_answer() {
    let f: Failure<u16> = Failure::Api(Answer {
        status: 403,
        headers: HeaderMap::new(),
        json: json!({}),
    })
    .map_api(|a| a.status);
    assert_eq!(f, Failure::Api(403));
    assert_eq!(f.to_string(), "403");
    assert_eq!(
        Failure::<u16>::NotSent("x".into()).map_api(|s| s + 1),
        Failure::NotSent("x".into())
    );
}
