//! `g2-agent`: the process that runs inside each group's container and
//! drives Claude Code. Until the container runtime lands it only reports its
//! version; it already links the shared transcript and archive code it will
//! use for the PreCompact hook.

fn main() {
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        None | Some("--version") | Some("-V") | Some("version") => {
            println!("g2-agent {}", env!("CARGO_PKG_VERSION"));
        }
        Some(other) => {
            eprintln!("g2-agent: unknown command {other:?} (this build knows only --version)");
            std::process::exit(2);
        }
    }
}
