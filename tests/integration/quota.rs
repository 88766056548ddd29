//! Disk quotas against hostile writers, with real Docker, the real Claude
//! Code in the agent image, the offline model and `g2 serve`: a plain
//! writer, one that hides its bytes under 70 nested folders, one that
//! names its file with bytes that are not UTF-8, one that makes files by
//! the thousand, and one that writes into a file it deleted but holds
//! open. Each is stopped while it writes and told why, refused while over
//! (the last holds nothing once stopped), and answered again once its
//! files are gone.

use std::os::unix::ffi::OsStrExt;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_over_its_disk_quota_is_stopped_and_told() {
    let Some((home, s)) = quota_host(&[("G2_CONTAINER__DISK_MB", "40")]) else {
        return;
    };
    // 5 MB every half second, far past 40 MB unless stopped.
    post(&s.url, "family", "ann", "g2:bash for i in $(seq 1 40); do head -c 5000000 /dev/zero > f$i.bin; sleep 0.5; done; echo wrote-all").await;
    let t = wait_bot(&s.url, "family", 1, 180).await;
    assert!(
        t[0].starts_with(
            "@ann sorry, I could not answer: the agent was stopped: this group's files take"
        ) && t[0].contains("over its disk quota of 40 MB"),
        "{t:?}"
    );
    let written = shared::count_entries(home.path().join("groups/family"), |n| n.ends_with(".bin"));
    assert!(written < 40, "stopped while writing ({written} files)");
    // Another group keeps working.
    post(&s.url, "main", "bo", "hello main").await;
    assert_eq!(
        wait_bot(&s.url, "main", 1, 180).await[0],
        "Offline model (g2) received: \"hello main\""
    );
    // Over its quota, the group does not start: told at once.
    post(&s.url, "family", "ann", "hello?").await;
    let t = wait_bot(&s.url, "family", 2, 60).await;
    assert!(
        t[1].starts_with("@ann sorry, I could not answer: this group's files take"),
        "{t:?}"
    );
    let st = get_json(&format!("{}/api/groups/family/status", s.url)).await;
    assert!(
        st["disk"]["used_bytes"].as_u64().unwrap() > st["disk"]["quota_bytes"].as_u64().unwrap(),
        "{st}"
    );
    // Under it again, it works.
    for e in std::fs::read_dir(home.path().join("groups/family")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "bin") {
            std::fs::remove_file(p).unwrap();
        }
    }
    post(&s.url, "family", "ann", "and now?").await;
    let t = wait_bot(&s.url, "family", 3, 180).await;
    assert_eq!(t[2], "Offline model (g2) received: \"and now?\"");
}

/// A file deleted while its writer holds it open is in no tree, yet takes
/// its blocks: the count looks into the agent's processes too, so the
/// writer is stopped like the plain one. Stopped, it holds nothing: the
/// group answers again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_into_a_file_deleted_while_open_is_stopped_and_told() {
    let Some((home, s)) = quota_host(&[("G2_CONTAINER__DISK_MB", "20")]) else {
        return;
    };
    // 5 MB every half second into a file that has no name any more, 400 MB
    // unless stopped; each round is written down beside it.
    post(
        &s.url,
        "family",
        "ann",
        "g2:bash cd /workspace/group && exec 3>held.bin && rm held.bin && \
         for i in $(seq 1 80); do head -c 5000000 /dev/zero >&3; echo $i > rounds; sleep 0.5; done; echo wrote-all",
    )
    .await;
    let t = wait_bot(&s.url, "family", 1, 180).await;
    assert!(
        t[0].starts_with(
            "@ann sorry, I could not answer: the agent was stopped: this group's files take"
        ) && t[0].contains("in files deleted but still held open), over its disk quota of 20 MB"),
        "{t:?}"
    );
    let rounds = std::fs::read_to_string(home.path().join("groups/family/rounds")).unwrap();
    let rounds: u32 = rounds.trim().parse().unwrap();
    assert!(rounds < 80, "stopped while writing ({rounds} rounds)");
    // The agent's end freed the space: the next count is under the quota.
    post(&s.url, "family", "ann", "and now?").await;
    let t = wait_bot(&s.url, "family", 2, 180).await;
    assert_eq!(t[1], "Offline model (g2) received: \"and now?\"");
    let st = get_json(&format!("{}/api/groups/family/status", s.url)).await;
    assert_eq!(st["disk"]["held_bytes"], 0, "{st}");
}

/// One hostile writer's whole story: started under its quotas, stopped
/// mid-write (fewer than its 40 rounds in `rounds`, a folder of `made`)
/// and told (`told` is in the words), refused while over, shown over in
/// its status, answered again once `made` (in the group folder) is
/// deleted. `n` answers were in the chat before.
async fn stopped_refused_and_back(
    s: &Serve,
    home: &TestHome,
    writer: &str,
    told: &str,
    (made, rounds): (&str, &[u8]),
    n: usize,
) {
    post(&s.url, "family", "ann", &format!("g2:bash {writer}")).await;
    let t = wait_bot(&s.url, "family", n + 1, 180).await;
    assert!(
        t[n].starts_with("@ann sorry, I could not answer: the agent was stopped: ")
            && t[n].contains(told),
        "{made}: {t:?}"
    );
    let dir = home.path().join("groups/family").join(made);
    let written = std::fs::read_dir(dir.join(std::ffi::OsStr::from_bytes(rounds)))
        .unwrap()
        .count();
    assert!(
        written < 40,
        "{made}: stopped while writing ({written} rounds)"
    );
    post(&s.url, "family", "ann", "hello?").await;
    let t = wait_bot(&s.url, "family", n + 2, 60).await;
    assert!(
        t[n + 1].starts_with("@ann sorry, I could not answer: this group")
            && t[n + 1].contains(told),
        "{made}: {t:?}"
    );
    let st = get_json(&format!("{}/api/groups/family/status", s.url)).await;
    let d = &st["disk"];
    assert!(
        d["used_bytes"].as_u64() > d["quota_bytes"].as_u64()
            || d["entries"].as_u64() > d["max_entries"].as_u64(),
        "{made}: {st}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    post(&s.url, "family", "ann", "and now?").await;
    let t = wait_bot(&s.url, "family", n + 3, 180).await;
    assert_eq!(
        t[n + 2],
        "Offline model (g2) received: \"and now?\"",
        "{made}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_odd_named_and_many_file_writers_are_counted_like_the_plain_one() {
    let Some((home, s)) = quota_host(&[
        ("G2_CONTAINER__DISK_MB", "40"),
        ("G2_CONTAINER__MAX_GROUP_FILES", "5000"),
    ]) else {
        return;
    };
    // 5 MB every half second, 70 folders down.
    let deep = "d=/workspace/group/deep; for i in $(seq 1 70); do d=$d/n; done; mkdir -p $d; \
                for i in $(seq 1 40); do head -c 5000000 /dev/zero > $d/f$i.bin; sleep 0.5; done; echo wrote-all";
    let down = ["n"; 70].join("/");
    let told = "over its disk quota of 40 MB";
    stopped_refused_and_back(&s, &home, deep, told, ("deep", down.as_bytes()), 0).await;
    // The same into files whose names are the byte 0xff, in a folder named 0xfe.
    let odd = "o=$(printf '\\376'); f=$(printf '\\377'); mkdir -p \"/workspace/group/odd/$o\"; \
               for i in $(seq 1 40); do head -c 5000000 /dev/zero > \"/workspace/group/odd/$o/$f$i\"; sleep 0.5; done; echo wrote-all";
    stopped_refused_and_back(&s, &home, odd, told, ("odd", b"\xfe"), 3).await;
    // A thousand empty files every half second.
    let many = "mkdir -p /workspace/group/many && cd /workspace/group/many && \
                for i in $(seq 1 40); do mkdir b$i && (cd b$i && seq 1 1000 | xargs touch); sleep 0.5; done; echo wrote-all";
    let told = "over its limit of 5000";
    stopped_refused_and_back(&s, &home, many, told, ("many", b"."), 6).await;
}

/// `g2 serve` on a home with a `family` group whose disk is checked every
/// 300 ms under `quota` (more settings); `None` without the agent image.
fn quota_host(quota: &[(&str, &str)]) -> Option<(TestHome, Serve)> {
    if !image_ready() {
        return None;
    }
    let home = home_with_family();
    let mut env = vec![("G2_CONTAINER__DISK_CHECK_MS", "300")];
    env.extend_from_slice(quota);
    let s = serve(&home, &env);
    Some((home, s))
}
