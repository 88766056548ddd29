//! The container's output protocol on the host's side: complete frames
//! (`OUTPUT_START` … `OUTPUT_END`, JSON between) pulled out of stdout
//! however it is chunked, and what a frame says about its turn.
//!
//! Boundary: pure functions over bytes and [`ContainerOutput`]; no I/O.
//! [`take_frames`] is public (re-exported as `agent::take_frames`) for the
//! fuzz crate.

use g2_core::wire::{ContainerOutput, OUTPUT_END, OUTPUT_START, OutputStatus};

/// Pulls complete frames out of `buf`, leaving any partial one. Searches
/// bytes: no copy of the buffer per chunk, and offsets stay right when the
/// output is not valid UTF-8.
pub fn take_frames(buf: &mut Vec<u8>) -> Vec<ContainerOutput> {
    use memchr::memmem;
    let (open, close) = (OUTPUT_START.as_bytes(), OUTPUT_END.as_bytes());
    let mut frames = Vec::new();
    loop {
        let Some(start) = memmem::find(buf, open) else {
            // Keep only a possible partial marker.
            let keep = buf.len().saturating_sub(open.len());
            buf.drain(..keep);
            break;
        };
        let body_from = start + open.len();
        let Some(len) = memmem::find(&buf[body_from..], close) else {
            buf.drain(..start);
            break;
        };
        match serde_json::from_slice::<ContainerOutput>(
            buf[body_from..body_from + len].trim_ascii(),
        ) {
            Ok(f) => frames.push(f),
            Err(e) => tracing::warn!(error = %e, "unreadable output frame skipped"),
        }
        buf.drain(..body_from + len + close.len());
    }
    frames
}

/// How a frame ends its turn.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Finished {
    /// A successful result: the reply.
    Reply(String),
    /// An error the agent reported (a stale session's included).
    Error(String),
}

/// The turn a frame finishes, if it finishes one: a success with a result
/// is a reply, any frame with an error is an error, anything else (a
/// session announcement) finishes nothing.
pub(super) fn finished(frame: ContainerOutput) -> Option<Finished> {
    match (frame.status, frame.result, frame.error) {
        (OutputStatus::Success, Some(text), _) => Some(Finished::Reply(text)),
        (_, _, Some(e)) => Some(Finished::Error(e)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_across_chunks_and_noise() {
        let f1 = ContainerOutput {
            status: OutputStatus::Success,
            result: Some("hi".into()),
            new_session_id: Some("s".into()),
            error: None,
            trace: None,
        }
        .frame();
        let f2 = ContainerOutput {
            status: OutputStatus::Success,
            result: None,
            new_session_id: Some("s".into()),
            error: None,
            trace: None,
        }
        .frame();
        let all = format!("noise \u{fffd}\n{f1}more noise\n{f2}");
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for c in all.as_bytes().chunks(7) {
            buf.extend_from_slice(c);
            got.extend(take_frames(&mut buf));
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].result.as_deref(), Some("hi"));
        assert_eq!(got[1].result, None);
        assert!(buf.len() < OUTPUT_START.len());
    }
}
