use super::*;
use crate::store::Store;
use crate::store::tasks::{get, list, runs};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(1)).unwrap();
    (dir, s)
}

fn t(s: &str) -> DateTime<Utc> {
    parse_ts(s).unwrap()
}

fn next(kind: &str, value: &str, tz: &str, after: &str) -> Result<Option<DateTime<Utc>>> {
    next_run(kind, value, tz, t(after))
}

fn new_task(group: &str, kind: &str, value: &str) -> NewTask {
    NewTask {
        group_folder: group.into(),
        chat_jid: format!("local:{group}"),
        prompt: "say hello".into(),
        schedule_type: kind.into(),
        schedule_value: value.into(),
        timezone: None,
        context_mode: None,
    }
}

fn add(s: &Store, new: NewTask, now: &str) -> Task {
    let now = t(now);
    s.write_blocking(move |tx| create(tx, new, now)).unwrap()
}

fn claim(s: &Store, now: &str, claimer: &str) -> Vec<Task> {
    let now = t(now);
    let claimer = claimer.to_string();
    s.write_blocking(move |tx| claim_due(tx, now, &claimer, 10, &|_| true))
        .unwrap()
}

fn fetch(s: &Store, id: &str) -> Task {
    s.read_blocking(|c| get(c, id)).unwrap().unwrap()
}

fn done(s: &Store, id: &str, at: &str, outcome: std::result::Result<&str, &str>) -> Task {
    s.write_blocking(|tx| finish(tx, id, t(at), 1500, outcome))
        .unwrap()
}

fn change(
    s: &Store,
    id: &str,
    group: Option<&str>,
    action: StatusAction,
    now: &str,
) -> Result<Task> {
    s.write_blocking(|tx| set_status(tx, id, group, action, t(now)))
}

#[test]
fn cron_follows_the_wall_clock_across_dst() {
    let berlin = |after| {
        next("cron", "0 9 * * *", "Europe/Berlin", after)
            .unwrap()
            .unwrap()
    };
    // CET (UTC+1) before 2025-03-30, CEST (UTC+2) after.
    assert_eq!(
        berlin("2025-03-29T07:30:00.000Z"),
        t("2025-03-29T08:00:00.000Z")
    );
    assert_eq!(
        berlin("2025-03-29T12:00:00.000Z"),
        t("2025-03-30T07:00:00.000Z")
    );
    // Back to CET on 2025-10-26.
    assert_eq!(
        berlin("2025-10-25T12:00:00.000Z"),
        t("2025-10-26T08:00:00.000Z")
    );
    // 02:30 does not exist on 2025-03-30: the run is the first instant after the gap.
    let gap = next(
        "cron",
        "30 2 * * *",
        "Europe/Berlin",
        "2025-03-29T12:00:00.000Z",
    )
    .unwrap();
    assert_eq!(gap, Some(t("2025-03-30T01:00:00.000Z")));
    // Strictly after: a run at 09:00 sharp is followed by the next day's.
    assert_eq!(
        next("cron", "0 9 * * *", "UTC", "2025-01-01T09:00:00.000Z").unwrap(),
        Some(t("2025-01-02T09:00:00.000Z"))
    );
    assert_eq!(
        next("cron", "@hourly", "UTC", "2025-01-01T09:10:00.000Z").unwrap(),
        Some(t("2025-01-01T10:00:00.000Z"))
    );
}

#[test]
fn interval_counts_from_after() {
    assert_eq!(
        next("interval", "60000", "UTC", "2025-01-01T00:00:00.250Z").unwrap(),
        Some(t("2025-01-01T00:01:00.250Z"))
    );
    assert_eq!(
        next("interval", "1000", "UTC", "2025-01-01T00:00:00.000Z").unwrap(),
        Some(t("2025-01-01T00:00:01.000Z"))
    );
    assert_eq!(
        following_run("interval", "1000", "UTC", t("2025-01-01T00:00:00.000Z")).unwrap(),
        Some(t("2025-01-01T00:00:01.000Z"))
    );
}

#[test]
fn once_in_a_timezone_or_with_an_offset() {
    let after = "2030-01-01T00:00:00.000Z";
    assert_eq!(
        next("once", "2025-06-01T09:00", "Europe/Berlin", after).unwrap(),
        Some(t("2025-06-01T07:00:00.000Z"))
    );
    assert_eq!(
        next("once", "2025-01-15T09:00:30", "Europe/Berlin", after).unwrap(),
        Some(t("2025-01-15T08:00:30.000Z"))
    );
    // An explicit offset wins over the task's timezone.
    assert_eq!(
        next(
            "once",
            "2025-06-01T09:00:00+02:00",
            "America/New_York",
            after
        )
        .unwrap(),
        Some(t("2025-06-01T07:00:00.000Z"))
    );
    assert_eq!(
        next("once", "2025-06-01T07:00:00Z", "UTC", after).unwrap(),
        Some(t("2025-06-01T07:00:00.000Z"))
    );
    // A fired once task has no following run.
    assert_eq!(
        following_run("once", "2025-06-01T09:00", "UTC", t(after)).unwrap(),
        None
    );
    // The clock skips 02:30 on 2025-03-30 in Berlin.
    let gap = next("once", "2025-03-30T02:30", "Europe/Berlin", after).unwrap_err();
    assert!(gap.to_string().contains("does not exist"), "{gap}");
}

#[test]
fn invalid_schedules_are_refused() {
    let after = "2025-01-01T00:00:00.000Z";
    for (kind, value, tz, needle) in [
        ("cron", "61 * * * *", "UTC", "\"61 * * * *\""),
        ("cron", "not a cron", "UTC", "\"not a cron\""),
        ("cron", "0 0 9 * * *", "UTC", "has 6 fields"),
        ("cron", "0 0 9 * * * 2025", "UTC", "has 7 fields"),
        ("cron", "0 0 30 2 *", "UTC", "\"0 0 30 2 *\""),
        (
            "cron",
            "0 9 * * *",
            "Mars/Olympus_Mons",
            "\"Mars/Olympus_Mons\"",
        ),
        ("interval", "0", "UTC", "interval \"0\""),
        ("interval", "999", "UTC", "at least 1000"),
        ("interval", "-5000", "UTC", "interval"),
        ("interval", "1.5e3", "UTC", "interval"),
        ("interval", "soon", "UTC", "interval"),
        ("once", "tomorrow", "UTC", "\"tomorrow\""),
        ("weekly", "1", "UTC", "schedule type"),
    ] {
        match next(kind, value, tz, after) {
            Err(Error::Invalid(m)) => assert!(m.contains(needle), "{kind} {value} {tz}: {m}"),
            other => panic!("{kind} {value} {tz}: {other:?}"),
        }
    }
}

#[test]
fn create_validates_and_fills_defaults() {
    let (_d, s) = store();
    let now = "2025-01-01T00:00:00.000Z";
    let task = add(&s, new_task("dev", "cron", " 0 9 * * 1-5 "), now);
    assert!(
        task.id.starts_with("task-") && task.id.len() == 17,
        "{}",
        task.id
    );
    assert_eq!(task.status, "active");
    assert_eq!(task.timezone, "UTC");
    assert_eq!(task.context_mode, "isolated");
    assert_eq!(task.schedule_value, "0 9 * * 1-5");
    assert_eq!(task.next_run.as_deref(), Some("2025-01-01T09:00:00.000Z"));
    assert_eq!(fetch(&s, &task.id), task);

    let bad = |f: &dyn Fn(&mut NewTask)| {
        let mut n = new_task("dev", "interval", "60000");
        f(&mut n);
        s.write_blocking(move |tx| create(tx, n, t(now)))
            .unwrap_err()
    };
    assert!(matches!(
        bad(&|n| n.prompt = "  ".into()),
        Error::Invalid(_)
    ));
    assert!(matches!(
        bad(&|n| n.prompt = "x".repeat(MAX_PROMPT + 1)),
        Error::Invalid(_)
    ));
    assert!(matches!(
        bad(&|n| n.schedule_value = "0".into()),
        Error::Invalid(_)
    ));
    assert!(matches!(
        bad(&|n| n.timezone = Some("Nowhere/City".into())),
        Error::Invalid(_)
    ));
    assert!(matches!(
        bad(&|n| n.context_mode = Some("shared".into())),
        Error::Invalid(_)
    ));
    assert!(matches!(
        bad(&|n| n.group_folder = "../etc".into()),
        Error::Validation(_)
    ));
    assert!(matches!(
        bad(&|n| n.chat_jid = "".into()),
        Error::Invalid(_)
    ));
    assert_eq!(s.read_blocking(|c| list(c, None)).unwrap().len(), 1);
}

#[test]
fn list_filters_by_group() {
    let (_d, s) = store();
    let now = "2025-01-01T00:00:00.000Z";
    let a = add(&s, new_task("a", "interval", "60000"), now);
    let b = add(&s, new_task("b", "interval", "60000"), now);
    let all = s.read_blocking(|c| list(c, None)).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(s.read_blocking(|c| list(c, Some("a"))).unwrap(), vec![a]);
    assert_eq!(s.read_blocking(|c| list(c, Some("b"))).unwrap(), vec![b]);
    assert!(s.read_blocking(|c| list(c, Some("c"))).unwrap().is_empty());
}

#[test]
fn claims_are_exclusive_and_advance_next_run() {
    let (_d, s) = store();
    let task = add(
        &s,
        new_task("dev", "interval", "60000"),
        "2025-01-01T00:00:00.000Z",
    );
    assert_eq!(
        s.read_blocking(next_due).unwrap(),
        Some(t("2025-01-01T00:01:00.000Z"))
    );
    assert!(claim(&s, "2025-01-01T00:00:30.000Z", "host-a").is_empty());

    let got = claim(&s, "2025-01-01T00:01:01.000Z", "host-a");
    assert_eq!(got.len(), 1);
    // The claimed task carries the slot being run.
    assert_eq!(got[0].next_run.as_deref(), Some("2025-01-01T00:01:00.000Z"));
    assert_eq!(
        fetch(&s, &task.id).next_run.as_deref(),
        Some("2025-01-01T00:02:01.000Z")
    );
    // Claimed: nobody else gets it, even once it is due again.
    assert!(claim(&s, "2025-01-01T00:01:01.000Z", "host-b").is_empty());
    assert!(claim(&s, "2025-01-01T00:05:00.000Z", "host-b").is_empty());
    assert_eq!(s.read_blocking(next_due).unwrap(), None);

    let after = done(&s, &task.id, "2025-01-01T00:01:01.000Z", Ok("hello"));
    assert_eq!(after.status, "active");
    assert_eq!(after.last_result.as_deref(), Some("hello"));
    assert_eq!(after.last_run.as_deref(), Some("2025-01-01T00:01:01.000Z"));
    assert_eq!(
        s.read_blocking(next_due).unwrap(),
        Some(t("2025-01-01T00:02:01.000Z"))
    );
    assert_eq!(claim(&s, "2025-01-01T00:05:00.000Z", "host-b").len(), 1);
}

#[test]
fn missed_cron_slots_fire_once() {
    let (_d, s) = store();
    let task = add(
        &s,
        new_task("dev", "cron", "0 * * * *"),
        "2025-01-01T00:30:00.000Z",
    );
    assert_eq!(task.next_run.as_deref(), Some("2025-01-01T01:00:00.000Z"));
    // The host was down from 00:30 to 05:30: four slots missed, one run.
    let got = claim(&s, "2025-01-01T05:30:00.000Z", "host");
    assert_eq!(got.len(), 1);
    assert_eq!(
        fetch(&s, &task.id).next_run.as_deref(),
        Some("2025-01-01T06:00:00.000Z")
    );
    done(&s, &task.id, "2025-01-01T05:30:00.000Z", Ok("ok"));
    assert!(claim(&s, "2025-01-01T05:30:00.000Z", "host").is_empty());
    assert_eq!(claim(&s, "2025-01-01T06:00:00.000Z", "host").len(), 1);
}

#[test]
fn once_fires_then_completes() {
    let (_d, s) = store();
    // A time in the past is due at once.
    let task = add(
        &s,
        new_task("dev", "once", "2024-12-31T23:00"),
        "2025-01-01T00:00:00.000Z",
    );
    assert_eq!(task.next_run.as_deref(), Some("2024-12-31T23:00:00.000Z"));
    let got = claim(&s, "2025-01-01T00:00:00.000Z", "host");
    assert_eq!(got.len(), 1);
    assert_eq!(fetch(&s, &task.id).next_run, None);
    assert_eq!(s.read_blocking(next_due).unwrap(), None);

    let long = "é".repeat(3000);
    let after = done(&s, &task.id, "2025-01-01T00:00:00.000Z", Ok(&long));
    assert_eq!(after.status, "completed");
    assert_eq!(after.next_run, None);
    assert_eq!(
        after.last_result.as_ref().unwrap().chars().count(),
        MAX_LAST_RESULT_CHARS
    );
    assert!(claim(&s, "2025-02-01T00:00:00.000Z", "host").is_empty());

    let log = s.read_blocking(|c| runs(c, &task.id, 10)).unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].status.as_str(), log[0].duration_ms),
        ("success", 1500)
    );
    assert_eq!(log[0].result.as_deref(), Some(long.as_str()));
    assert_eq!(log[0].error, None);
    // A completed task cannot be resumed.
    let e = change(
        &s,
        &task.id,
        None,
        StatusAction::Resume,
        "2025-02-01T00:00:00.000Z",
    )
    .unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
}

#[test]
fn errors_are_logged() {
    let (_d, s) = store();
    let task = add(
        &s,
        new_task("dev", "interval", "60000"),
        "2025-01-01T00:00:00.000Z",
    );
    claim(&s, "2025-01-01T00:01:00.000Z", "host");
    let after = done(
        &s,
        &task.id,
        "2025-01-01T00:01:00.000Z",
        Err("container died"),
    );
    assert_eq!(after.last_result.as_deref(), Some("Error: container died"));
    assert_eq!(after.status, "active");
    let log = s.read_blocking(|c| runs(c, &task.id, 10)).unwrap();
    assert_eq!(log[0].status, "error");
    assert_eq!(log[0].error.as_deref(), Some("container died"));
    assert!(matches!(
        s.write_blocking(|tx| finish(tx, "task-nope", Utc::now(), 1, Ok("x"))),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn cancelled_during_a_run_stays_cancelled() {
    let (_d, s) = store();
    let now = "2025-01-01T00:00:00.000Z";
    let cron = add(&s, new_task("dev", "cron", "* * * * *"), now);
    let once = add(&s, new_task("dev", "once", "2025-01-01T00:00"), now);
    assert_eq!(claim(&s, "2025-01-01T00:01:00.000Z", "host").len(), 2);
    for id in [&cron.id, &once.id] {
        change(&s, id, Some("dev"), StatusAction::Cancel, now).unwrap();
        let after = done(&s, id, "2025-01-01T00:01:30.000Z", Ok("done"));
        assert_eq!(after.status, "cancelled");
    }
    assert!(claim(&s, "2025-01-01T01:00:00.000Z", "host").is_empty());
    assert_eq!(s.read_blocking(next_due).unwrap(), None);
    let e = change(&s, &cron.id, None, StatusAction::Cancel, now).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
}

#[test]
fn status_changes_and_group_visibility() {
    let (_d, s) = store();
    let task = add(
        &s,
        new_task("dev", "interval", "60000"),
        "2025-01-01T00:00:00.000Z",
    );
    let now = "2025-01-01T10:00:00.000Z";

    // Another group's task looks exactly like a missing one.
    let hidden = change(&s, &task.id, Some("other"), StatusAction::Pause, now).unwrap_err();
    let missing = change(
        &s,
        "task-000000000000",
        Some("other"),
        StatusAction::Pause,
        now,
    )
    .unwrap_err();
    assert!(matches!(hidden, Error::NotFound(_)), "{hidden}");
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
    assert_eq!(fetch(&s, &task.id).status, "active");

    let paused = change(&s, &task.id, Some("dev"), StatusAction::Pause, now).unwrap();
    assert_eq!(paused.status, "paused");
    assert!(claim(&s, now, "host").is_empty());
    assert!(matches!(
        change(&s, &task.id, None, StatusAction::Pause, now),
        Err(Error::Conflict(_))
    ));

    let resumed = change(&s, &task.id, None, StatusAction::Resume, now).unwrap();
    assert_eq!(resumed.status, "active");
    assert_eq!(
        resumed.next_run.as_deref(),
        Some("2025-01-01T10:01:00.000Z")
    );
    assert!(matches!(
        change(&s, &task.id, None, StatusAction::Resume, now),
        Err(Error::Conflict(_))
    ));

    // A resumed once task keeps its time.
    let once = add(&s, new_task("dev", "once", "2025-03-01T12:00"), now);
    change(&s, &once.id, None, StatusAction::Pause, now).unwrap();
    let back = change(
        &s,
        &once.id,
        None,
        StatusAction::Resume,
        "2025-02-01T00:00:00.000Z",
    )
    .unwrap();
    assert_eq!(back.next_run.as_deref(), Some("2025-03-01T12:00:00.000Z"));

    // Paused tasks can be cancelled.
    change(&s, &task.id, None, StatusAction::Pause, now).unwrap();
    let cancelled = change(&s, &task.id, Some("dev"), StatusAction::Cancel, now).unwrap();
    assert_eq!(cancelled.status, "cancelled");
}

#[test]
fn released_claims_are_due_again() {
    let (_d, s) = store();
    let now = "2025-01-01T00:00:00.000Z";
    let once = add(&s, new_task("dev", "once", "2025-01-01T00:00"), now);
    let cron = add(&s, new_task("dev", "cron", "0 * * * *"), now);
    assert_eq!(claim(&s, "2025-01-01T01:00:00.000Z", "host-1:").len(), 2);
    assert_eq!(fetch(&s, &once.id).next_run, None);

    // Another claimer's prefix releases nothing.
    assert_eq!(
        s.write_blocking(|tx| release_claims(tx, Some("host-2:")))
            .unwrap(),
        0
    );
    assert!(claim(&s, "2025-01-01T01:00:00.000Z", "host-2:").is_empty());

    // The host restarts: both interrupted runs are due again.
    assert_eq!(
        s.write_blocking(|tx| release_claims(tx, Some("host-1")))
            .unwrap(),
        2
    );
    assert_eq!(
        fetch(&s, &once.id).next_run.as_deref(),
        Some("2025-01-01T00:00:00.000Z")
    );
    assert_eq!(
        fetch(&s, &cron.id).next_run.as_deref(),
        Some("2025-01-01T01:00:00.000Z")
    );
    assert_eq!(
        s.read_blocking(next_due).unwrap(),
        Some(t("2025-01-01T00:00:00.000Z"))
    );
    let again = claim(&s, "2025-01-01T01:05:00.000Z", "host-3:");
    assert_eq!(again.len(), 2);
    assert_eq!(
        fetch(&s, &cron.id).next_run.as_deref(),
        Some("2025-01-01T02:00:00.000Z")
    );
    assert_eq!(s.write_blocking(|tx| release_claims(tx, None)).unwrap(), 2);
}

#[test]
fn next_due_is_the_earliest_active_unclaimed_run() {
    let (_d, s) = store();
    let now = "2025-01-01T00:00:00.000Z";
    assert_eq!(s.read_blocking(next_due).unwrap(), None);
    let soon = add(&s, new_task("a", "interval", "5000"), now);
    add(&s, new_task("b", "interval", "60000"), now);
    assert_eq!(
        s.read_blocking(next_due).unwrap(),
        Some(t("2025-01-01T00:00:05.000Z"))
    );
    change(&s, &soon.id, None, StatusAction::Pause, now).unwrap();
    assert_eq!(
        s.read_blocking(next_due).unwrap(),
        Some(t("2025-01-01T00:01:00.000Z"))
    );
}

#[test]
fn truncation_respects_char_boundaries() {
    assert_eq!(truncate_chars("héllo", 2), "hé");
    assert_eq!(truncate_chars("hé", 5), "hé");
    assert_eq!(truncate_chars("", 0), "");
}
