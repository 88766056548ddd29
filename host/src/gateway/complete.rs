//! The calls the host makes of the model for itself (memory extraction),
//! through the same provider, budgets and usage rows as an agent's.

use std::time::Instant;

use axum::http::StatusCode;
use bytes::Bytes;

use super::usage::{self, Outcome, Record, Tokens};
use super::{Gateway, ModelRequest, anthropic, meter, offline};
use crate::Error;
use crate::store;
use g2_core::validate::GroupFolder;

/// Why a call the host makes for itself ([`Gateway::complete`]) got no
/// answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A daily budget is used up: nothing helps before 00:00 UTC.
    #[error("{0}")]
    OverBudget(String),
    /// The provider answered with an error, or the answer was unreadable.
    #[error("{0}")]
    Failed(String),
}

/// Largest answer [`Gateway::complete`] reads.
const MAX_ANSWER: usize = 16 << 20;

impl Gateway {
    /// One non-streaming `POST /v1/messages` the host makes for itself
    /// (memory extraction), accounted to `caller` under `purpose` exactly
    /// like an agent's request: the caller's daily budget
    /// (`gateway.daily_tokens`) is checked first, then `cap`, the tokens
    /// this purpose may use per day (`memory.daily_tokens`), with the
    /// request's own estimated size; a usage row is written whatever the
    /// end. It takes none of the caller's concurrency
    /// slots, so it never holds up the agent's own requests.
    pub async fn complete(
        &self,
        caller: &GroupFolder,
        purpose: usage::Purpose,
        cap: Option<(u64, &str)>,
        body: serde_json::Value,
    ) -> Result<serde_json::Value, CallError> {
        use futures_util::StreamExt;
        let started = Instant::now();
        let settings = &self.inner.settings;
        let requested = body["model"].as_str().unwrap_or_default().to_string();
        let model = match &settings.model {
            Some(m) if self.provider_name() == "anthropic" => m.clone(),
            _ => requested,
        };
        let mut body = body;
        body["model"] = serde_json::Value::String(model.clone());
        body["stream"] = serde_json::Value::Bool(false);
        let mut rec = Record {
            caller: caller.to_string(),
            purpose,
            provider: self.provider_name().to_string(),
            model: model.clone(),
            tokens: Tokens::default(),
            duration_ms: 0,
            status: StatusCode::TOO_MANY_REQUESTS.as_u16(),
            outcome: Outcome::Refused,
            streamed: false,
            started_at: crate::now_rfc3339(),
            day: usage::today(),
        };
        let over = |why: String, mut rec: Record| {
            rec.duration_ms = started.elapsed().as_millis() as u64;
            self.record(rec);
            Err(CallError::OverBudget(why))
        };
        let read_err = |e: Error| CallError::Failed(format!("reading usage: {e}"));
        if let Some(budget) = settings.limits_for(caller).daily_tokens {
            let spent = self.spent_today(caller).await.map_err(read_err)?;
            if spent >= budget {
                let why = format!(
                    "{caller} used {spent} of its {budget} tokens for today (gateway.daily_tokens); \
                     the budget resets at 00:00 UTC"
                );
                return over(why, rec);
            }
        }
        if let Some((cap, setting)) = cap {
            let (c, d) = (caller.to_string(), rec.day.clone());
            let spent = self
                .inner
                .store
                .read(move |conn| store::usage::tokens_on(conn, &c, &d, Some(purpose)))
                .await
                .map_err(read_err)?;
            // The request's own size counts before it is sent (4 bytes a
            // token), so a cap is not overrun by the call that crosses it.
            let asking = offline::estimate_tokens(body.to_string().len());
            if spent + asking > cap {
                let why = format!(
                    "{caller} used {spent} of its {cap} {} tokens for today ({setting}) \
                     and the next request needs about {asking}; it resumes after 00:00 UTC",
                    purpose.as_str()
                );
                return over(why, rec);
            }
        }
        let mreq = ModelRequest {
            path_and_query: "/v1/messages".into(),
            headers: anthropic::forwardable(&axum::http::HeaderMap::new()),
            body: Bytes::from(body.to_string()),
            model,
            stream: false,
        };
        let reply = self.inner.provider.messages(mreq).await;
        rec.status = reply.status.as_u16();
        let mut meter = meter::Meter::new(false);
        let mut answer = Vec::new();
        let mut broken = None;
        let mut stream = reply.body;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) if answer.len() + c.len() <= MAX_ANSWER => {
                    meter.feed(&c);
                    answer.extend_from_slice(&c);
                }
                Ok(_) => {
                    broken = Some(format!("the answer is larger than {MAX_ANSWER} bytes"));
                    break;
                }
                Err(e) => {
                    broken = Some(format!("the answer broke off: {e}"));
                    break;
                }
            }
        }
        meter.finish();
        rec.tokens = meter.tokens;
        rec.duration_ms = started.elapsed().as_millis() as u64;
        rec.outcome = if reply.status.is_success() && broken.is_none() {
            Outcome::Ok
        } else {
            Outcome::Error
        };
        self.record(rec);
        if let Some(why) = broken {
            return Err(CallError::Failed(why));
        }
        let value: serde_json::Value = serde_json::from_slice(&answer).map_err(|e| {
            CallError::Failed(format!("the answer ({}) is not JSON: {e}", reply.status))
        })?;
        if !reply.status.is_success() {
            let msg = value["error"]["message"].as_str().unwrap_or("no message");
            return Err(CallError::Failed(format!(
                "the model answered {}: {msg}",
                reply.status
            )));
        }
        Ok(value)
    }
}
