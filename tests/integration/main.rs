//! g2's integration tests: one binary, one module per area. They run the
//! real `g2` binary against a temporary home, real SQLite, and (where a test
//! says so) the real Docker engine and Claude Code CLI installed by
//! `scripts/setup.sh`. With `CI=true`, a missing engine or CLI fails the
//! test instead of skipping it.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod support;

mod agents;
mod api;
mod backup;
mod bot_api;
mod browser;
mod channel_support;
mod channels;
mod chat;
mod cli;
mod cluster;
mod corpus;
mod crashes;
mod discord;
mod discord_api;
mod doctor;
mod extraction;
mod fairness;
mod fixtures;
mod gateway;
mod graph_api;
mod hardening;
mod hosts;
mod ipc;
mod local_api;
mod login;
mod loopback;
mod mcp;
mod meaning;
mod media;
mod memory;
#[path = "../pg_cluster.rs"]
mod pg_cluster;
mod postgres;
mod privacy;
mod quickstart;
mod quota;
mod quoting;
mod routing;
mod search;
mod secrets;
mod sessions;
mod slack;
mod slack_api;
mod startup;
mod steps;
mod stream;
mod telegram;
mod trace;
mod viewer;
mod whatsapp;
