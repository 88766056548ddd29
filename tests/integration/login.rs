//! Guessing `api.token` is slowed per client address (SECURITY.md): wrong
//! tokens, at `/login` or as bearer tokens on `/api`, are answered 429
//! with `Retry-After` after the first few, at once and without a look at
//! the token, while the operator, from another address, is answered at
//! once throughout; `/login` and `/logout` refuse in the API's error
//! shape. The clients come from different loopback addresses (Linux
//! routes all of 127.0.0.0/8 to `lo`).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::support::*;

const TOKEN: &str = "tok-login-0123456789";

/// A client whose connections come from `addr`, following no redirect.
fn client_from(addr: &str) -> reqwest::Client {
    let _ = http_client(); // installs the TLS crypto provider
    reqwest::Client::builder()
        .local_address(addr.parse::<IpAddr>().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `r` with `fields` as a form body, as a browser sends a form.
fn form(r: reqwest::RequestBuilder, fields: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    r.header("content-type", "application/x-www-form-urlencoded")
        .body(body)
}

/// A sign-in with `token`, as the viewer's form sends it.
fn sign_in(c: &reqwest::Client, base: &str, token: &str) -> reqwest::RequestBuilder {
    form(c.post(format!("{base}/login")), &[("token", token)])
}

/// An answer's status, `Retry-After` and body (JSON, or the text).
async fn answer(r: reqwest::RequestBuilder) -> (StatusCode, Option<u64>, Value) {
    let resp = r.send().await.unwrap();
    let status = resp.status();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, retry, body)
}

/// What a guesser got.
#[derive(Debug, Default)]
struct Tally {
    /// Wrong tokens the host checked (401).
    checked: usize,
    /// Refused unchecked while waiting (429).
    refused: usize,
}

/// Wrong tokens from `c` for `secs`, as fast as they are answered.
async fn guess(c: &reqwest::Client, base: &str, bearer: bool, secs: f64) -> Tally {
    let mut tally = Tally::default();
    let start = Instant::now();
    let mut i = 0;
    while start.elapsed().as_secs_f64() < secs {
        i += 1;
        let wrong = format!("tok-guess-{i:010}");
        let r = if bearer {
            c.get(format!("{base}/api/groups")).bearer_auth(&wrong)
        } else {
            sign_in(c, base, &wrong)
        };
        let (status, retry, body) = answer(r).await;
        match status.as_u16() {
            401 => {
                assert_eq!(body["error"]["kind"], "unauthorized", "{body}");
                tally.checked += 1;
            }
            429 => {
                assert_eq!(body["error"]["kind"], "too_many_attempts", "{body}");
                let retry = retry.expect("a 429 says when to retry");
                assert!((1..=60).contains(&retry), "{retry}");
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("{retry} s")),
                    "{body}"
                );
                tally.refused += 1;
            }
            s => panic!("a wrong token answered {s}: {body}"),
        }
    }
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guesser_is_slowed_and_the_operator_from_another_address_is_not() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[("G2_API__TOKEN", TOKEN)]);
    let base = s.url.as_str();
    let (login_guesser, bearer_guesser) = (client_from("127.0.0.1"), client_from("127.0.0.3"));
    let operator = client_from("127.0.0.2");

    // Two guessers (sign-in and bearer) for 2 s while the operator works.
    let guessing = 2.0;
    let operate = async {
        let start = Instant::now();
        let mut rounds = 0;
        while start.elapsed().as_secs_f64() < guessing + 0.5 {
            let t = Instant::now();
            let r = operator
                .get(format!("{base}/api/groups"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "the operator's bearer token");
            let r = sign_in(&operator, base, TOKEN).send().await.unwrap();
            assert_eq!(r.status(), 303, "the operator's sign-in");
            assert!(
                r.headers()["set-cookie"]
                    .to_str()
                    .unwrap()
                    .starts_with("g2_session=")
            );
            let took = t.elapsed();
            assert!(took < Duration::from_secs(2), "answered in {took:?}");
            rounds += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        rounds
    };
    let (by_login, by_bearer, rounds) = tokio::join!(
        guess(&login_guesser, base, false, guessing),
        guess(&bearer_guesser, base, true, guessing),
        operate
    );
    println!(
        "in {guessing} s: sign-in guesser {by_login:?}, bearer guesser {by_bearer:?}; operator rounds {rounds}"
    );
    for tally in [&by_login, &by_bearer] {
        // 2 free, then waits of 1 s and 2 s: 4 checked in 2 s (not ~200).
        assert!((3..=6).contains(&tally.checked), "{tally:?}");
        // The refusals are answered at once: no connection is held.
        assert!(tally.refused >= 20, "{tally:?}");
    }
    assert!(rounds >= 5, "{rounds}");

    // One address, one count: the sign-in guesser's bearer tokens wait too,
    // the right one as well (checking it would tell a guesser it is right).
    let (status, retry, body) = answer(
        login_guesser
            .get(format!("{base}/api/groups"))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    // Once the wait is over, the right token is taken and ends the count:
    // the next wrong one is checked again, not refused.
    tokio::time::sleep(Duration::from_secs(retry.unwrap())).await;
    let (status, _, body) = answer(
        login_guesser
            .get(format!("{base}/api/groups"))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = answer(
        login_guesser
            .get(format!("{base}/api/groups"))
            .bearer_auth("tok-guess-again-0000"),
    )
    .await;
    assert_eq!(status, 401);

    // Only a presented token counts: requests without one are refused
    // (401) and never slowed.
    let forgetful = client_from("127.0.0.4");
    for _ in 0..20 {
        let (status, _, body) = answer(forgetful.get(format!("{base}/api/groups"))).await;
        assert_eq!(status, 401, "{body}");
        let (status, _, body) = answer(form(
            forgetful.post(format!("{base}/login")),
            &[("token", "")],
        ))
        .await;
        assert_eq!(
            (status, body["error"]["kind"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid"))
        );
    }
    let (status, _, _) = answer(
        forgetful
            .get(format!("{base}/api/groups"))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_and_out_refuse_in_the_error_shape() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[("G2_API__TOKEN", TOKEN)]);
    let base = s.url.as_str();
    let c = client_from("127.0.0.1");
    let kind = |(status, _, body): (StatusCode, Option<u64>, Value)| {
        (
            status.as_u16(),
            body["error"]["kind"].as_str().map(String::from),
            body["error"]["message"].is_string(),
        )
    };
    let refused = |status: u16, k: &str| (status, Some(k.to_string()), true);

    // Sign-in: a wrong token, a form without one, not a form at all.
    assert_eq!(
        kind(answer(sign_in(&c, base, "tok-wrong-0123456789")).await),
        refused(401, "unauthorized")
    );
    let login = format!("{base}/login");
    assert_eq!(
        kind(answer(form(c.post(&login), &[("name", "x")])).await),
        refused(400, "invalid")
    );
    assert_eq!(
        kind(answer(c.post(&login).json(&serde_json::json!({ "token": TOKEN }))).await),
        refused(415, "unsupported_media_type")
    );

    // Sign-out: without a session, with another CSRF token, without the field.
    let logout = format!("{base}/logout");
    assert_eq!(
        kind(answer(form(c.post(&logout), &[("csrf", "x")])).await),
        refused(403, "forbidden")
    );
    let r = sign_in(&c, base, TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let page = c
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("<meta name=\"g2-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(csrf.len(), 64, "{page}");
    assert_eq!(
        kind(
            answer(form(
                c.post(&logout).header("cookie", &cookie),
                &[("csrf", &"0".repeat(64))]
            ))
            .await
        ),
        refused(403, "forbidden")
    );
    assert_eq!(
        kind(
            answer(form(
                c.post(&logout).header("cookie", &cookie),
                &[("other", "x")]
            ))
            .await
        ),
        refused(400, "invalid")
    );
    // The session's own sign-out goes on to the sign-in page.
    let r = form(
        c.post(&logout).header("cookie", &cookie),
        &[("csrf", csrf.as_str())],
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
}
