//! The scheduled tasks (`/tasks`) and one task with its run log
//! (`/tasks/{id}`), with pause, resume and cancel as forms the script
//! sends to the API. Listed and read through `crate::tasks`.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{failed, page, time};
use crate::api::Api;
use crate::tasks;

/// The actions a task in `status` can take, as forms the script sends.
fn task_actions(id: &str, status: &str) -> String {
    let id_enc = escape(id);
    let mut out = String::new();
    let mut form = |action: &str, label: &str, confirm: &str| {
        out.push_str(&format!(
            "<form class=\"inline\" data-api=\"/api/tasks/{id_enc}/{action}\" data-confirm=\"{confirm}\">\
<button type=\"submit\">{label}</button><span class=\"error\" role=\"alert\"></span></form>"
        ));
    };
    match status {
        "active" => {
            form("pause", "Pause", "Pause this task?");
            form("cancel", "Cancel", "Cancel this task for good?");
        }
        "paused" => {
            form("resume", "Resume", "Resume this task?");
            form("cancel", "Cancel", "Cancel this task for good?");
        }
        _ => {}
    }
    out
}

pub(super) async fn tasks_page(State(api): State<Api>) -> Response {
    let tasks = match tasks::list(&api.store, None).await {
        Ok(t) => t,
        Err(e) => return failed(&api, e),
    };
    let mut body = String::from("<h1>Scheduled tasks</h1>");
    if tasks.is_empty() {
        body.push_str(
            "<p class=\"empty\">No tasks yet — ask an agent to schedule one \
(“remind us every Monday at 9 to water the plants”).</p>",
        );
    } else {
        body.push_str("<ul class=\"list\" id=\"tasks\">");
        for t in &tasks {
            let id = escape(&t.id);
            body.push_str(&format!(
                "<li><a href=\"/tasks/{id}\">{prompt}</a> <span class=\"muted\">{g} · {kind} {value} · {status}</span>\
<div class=\"muted\">next {next} · last {last}</div>{result}{actions}</li>",
                prompt = escape(&g2_core::quote::one_line(&t.prompt)),
                g = escape(t.group_folder.as_str()),
                kind = escape(&t.schedule_type),
                value = escape(&t.schedule_value),
                status = escape(&t.status),
                next = t.next_run.as_deref().map(time).unwrap_or_else(|| "—".into()),
                last = t.last_run.as_deref().map(time).unwrap_or_else(|| "never".into()),
                result = t
                    .last_result
                    .as_deref()
                    .map(|r| format!("<div class=\"snippet\">{}</div>", escape(r)))
                    .unwrap_or_default(),
                actions = task_actions(&t.id, &t.status),
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Tasks", &body)
}

pub(super) async fn task_page(
    State(api): State<Api>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    let (task, runs) = match tasks::detail(&api.store, &id).await {
        Ok(x) => x,
        Err(e) => return failed(&api, e),
    };
    let mut body = format!(
        "<h1>Task</h1><p class=\"muted\"><a href=\"/tasks\">tasks</a> · <a href=\"/groups/{g}\">{g}</a> · \
{kind} {value} ({tz}) · {status}</p><pre class=\"context\">{prompt}</pre><p>next {next}</p>{actions}<h2>Runs</h2>",
        g = escape(task.group_folder.as_str()),
        kind = escape(&task.schedule_type),
        value = escape(&task.schedule_value),
        tz = escape(&task.timezone),
        status = escape(&task.status),
        prompt = escape(&task.prompt),
        next = task
            .next_run
            .as_deref()
            .map(time)
            .unwrap_or_else(|| "—".into()),
        actions = task_actions(&task.id, &task.status),
    );
    if runs.is_empty() {
        body.push_str("<p class=\"empty\">Not run yet.</p>");
    } else {
        body.push_str("<ul class=\"list\" id=\"runs\">");
        for r in &runs {
            body.push_str(&format!(
                "<li>{t} <span class=\"muted\">{status} · {ms} ms</span><div class=\"snippet\">{text}</div></li>",
                t = time(&r.run_at),
                status = escape(&r.status),
                ms = r.duration_ms,
                text = escape(r.result.as_deref().or(r.error.as_deref()).unwrap_or("")),
            ));
        }
        body.push_str("</ul>");
    }
    page(&api, "Task", &body)
}
