//! Model usage (`/usage`): the last 30 days as a chart of tokens per day
//! and group, drawn here as SVG (no script, no image fetched), and a
//! table with each group's daily budget and refusals.

use axum::extract::State;
use axum::response::Response;

use super::markdown::escape;
use super::{failed, page};
use crate::api::Api;
use crate::gateway::usage::is_offline;

/// Colours of the usage chart's groups, in turn.
const PALETTE: [&str; 6] = [
    "#2457c5", "#c55a24", "#2a9d5b", "#8e44ad", "#c5a024", "#5f6b7a",
];

/// Tokens per day and group as stacked bars, drawn as SVG.
fn usage_chart(
    lines: &[crate::gateway::usage::Line],
    days: &[String],
    groups: &[String],
) -> String {
    const W: f64 = 720.0;
    const H: f64 = 180.0;
    let total = |day: &str, g: &str| -> u64 {
        lines
            .iter()
            .filter(|l| l.day == day && l.group == g)
            .map(|l| {
                l.input_tokens + l.output_tokens + l.cache_read_tokens + l.cache_creation_tokens
            })
            .sum()
    };
    let max = days
        .iter()
        .map(|d| groups.iter().map(|g| total(d, g)).sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let step = W / days.len().max(1) as f64;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"Tokens per day and group\">",
        w = W + 30.0,
        h = H + 20.0
    );
    for (i, d) in days.iter().enumerate() {
        let mut y = H;
        for (k, g) in groups.iter().enumerate() {
            let n = total(d, g);
            if n == 0 {
                continue;
            }
            let h = n as f64 / max * (H - 10.0);
            y -= h;
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{c}\"><title>{title}</title></rect>",
                x = i as f64 * step + 2.0,
                w = (step - 4.0).max(1.0),
                c = PALETTE[k % PALETTE.len()],
                title = escape(&format!("{d} · {g}: {n} tokens")),
            ));
        }
        if days.len() <= 14 || i % 5 == 4 {
            svg.push_str(&format!(
                "<text x=\"{x:.1}\" y=\"{ty}\" font-size=\"10\" fill=\"currentColor\">{label}</text>",
                x = i as f64 * step + 2.0,
                ty = H + 14.0,
                label = escape(d.get(5..).unwrap_or(d)),
            ));
        }
    }
    svg.push_str("</svg>");
    svg
}

pub(super) async fn usage_page(State(api): State<Api>) -> Response {
    let since = crate::gateway::usage::since(30);
    let lines = match crate::gateway::usage::report(&api.store, None, &since).await {
        Ok(l) => l,
        Err(e) => return failed(&api, e),
    };
    let mut body =
        String::from("<h1>Model usage</h1><p class=\"muted\">The last 30 days, UTC.</p>");
    if lines.is_empty() {
        body.push_str(
            "<p class=\"empty\">No model requests yet — they are counted as the agents answer.</p>",
        );
        return page(&api, "Usage", &body);
    }
    // Every day of the range, used or not, so a bar's width means a day.
    let today = chrono::Utc::now().date_naive();
    let days: Vec<String> = (0..30)
        .rev()
        .filter_map(|back| today.checked_sub_days(chrono::Days::new(back)))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .collect();
    // The chart draws spend: the offline model's estimates are not.
    let spent: Vec<_> = lines.iter().filter(|l| !is_offline(l)).cloned().collect();
    if spent.len() < lines.len() {
        body.push_str(
            "<p class=\"muted\" id=\"offline-note\">Requests marked <em>offline model</em> were \
answered on this machine by g2's built-in model: no account, nothing spent, and no tokens \
counted.</p>",
        );
    }
    let mut groups: Vec<String> = spent.iter().map(|l| l.group.clone()).collect();
    groups.sort();
    groups.dedup();
    if !spent.is_empty() {
        body.push_str(&usage_chart(&spent, &days, &groups));
    }
    body.push_str("<p class=\"legend\">");
    for (k, g) in groups.iter().enumerate() {
        body.push_str(&format!(
            "<span class=\"swatch s{}\"></span> {} ",
            k % PALETTE.len(),
            escape(g)
        ));
    }
    body.push_str("</p><table class=\"usage\"><thead><tr><th>day</th><th>group</th><th>for</th><th>model</th>\
<th>requests</th><th>input</th><th>output</th><th>errors</th><th>refused</th><th>daily budget</th></tr></thead><tbody>");
    for l in &lines {
        let budget = if l.group.starts_with('@') {
            None
        } else {
            api.gateway.limits_for(&l.group).daily_tokens
        };
        let offline = is_offline(l);
        let tokens = |n: u64| {
            if offline {
                "–".to_string()
            } else {
                n.to_string()
            }
        };
        body.push_str(&format!(
            "<tr><td>{day}</td><td>{g}</td><td>{p}</td><td>{m}</td><td>{r}</td><td>{i}</td><td>{o}</td>\
<td>{e}</td><td>{x}</td><td>{b}</td></tr>",
            day = escape(&l.day),
            g = escape(&l.group),
            p = l.purpose.as_str(),
            m = if offline {
                "<span class=\"tag\">offline model</span>".to_string()
            } else {
                escape(&l.model)
            },
            r = l.requests,
            i = tokens(l.input_tokens + l.cache_read_tokens + l.cache_creation_tokens),
            o = tokens(l.output_tokens),
            e = l.errors,
            x = l.refused,
            b = budget.map(|b| b.to_string()).unwrap_or_else(|| "none".into()),
        ));
    }
    body.push_str("</tbody></table>");
    page(&api, "Usage", &body)
}
