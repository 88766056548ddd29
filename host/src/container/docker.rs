//! [`ContainerRuntime`] on the Docker Engine API through bollard (the API
//! version is negotiated: Engine 20.10 / API 1.41 and newer).
//!
//! One run: create (hardened host config, labels) → attach stdin/stdout/
//! stderr → start → inspect (its first process, for the disk ledger) →
//! write the input and close stdin → relay output → wait → remove. The relay task owns the container from start to removal, so a
//! container never outlives its run, whatever the caller does.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, MountType};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use super::{
    ContainerRuntime, LABEL_GROUP, LABEL_HOME, LABEL_HOST, LABEL_RUN, Mount, Output, Running, Spec,
};
use crate::{Error, Result};
use futures_util::future::BoxFuture;

#[derive(Clone)]
pub struct DockerRuntime {
    docker: Docker,
}

fn engine(e: bollard::errors::Error) -> Error {
    Error::Docker(format!("docker: {e}"))
}

impl DockerRuntime {
    /// Connects to the local engine and negotiates the API version.
    pub async fn connect() -> Result<Self> {
        let docker = Docker::connect_with_defaults()
            .map_err(engine)?
            .negotiate_version()
            .await
            .map_err(|e| {
                Error::Docker(format!(
                    "no Docker engine answers ({e}); run scripts/setup.sh"
                ))
            })?;
        Ok(DockerRuntime { docker })
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    fn body(spec: &Spec) -> ContainerCreateBody {
        let mut mounts = Vec::new();
        let mut tmpfs = HashMap::new();
        tmpfs.insert(
            "/tmp".to_string(),
            "rw,nosuid,nodev,size=512m,mode=1777".to_string(),
        );
        let (uid, gid) = spec
            .user
            .split_once(':')
            .unwrap_or((&spec.user, &spec.user));
        // The home is writable scratch space; its .claude is the mount below.
        tmpfs.insert(
            crate::container::image::AGENT_HOME.to_string(),
            format!("rw,nosuid,nodev,size=64m,mode=0755,uid={uid},gid={gid}"),
        );
        for m in &spec.mounts {
            match m {
                Mount::Bind {
                    host,
                    container,
                    read_only,
                } => mounts.push(bollard::models::Mount {
                    target: Some(container.clone()),
                    source: Some(host.to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(*read_only),
                    ..Default::default()
                }),
                Mount::Tmpfs { container, options } => {
                    tmpfs.insert(container.clone(), options.clone());
                }
            }
        }
        let labels = HashMap::from([
            (LABEL_GROUP.to_string(), spec.group.clone()),
            (LABEL_RUN.to_string(), spec.run_id.clone()),
            (LABEL_HOME.to_string(), spec.home_label.clone()),
            (LABEL_HOST.to_string(), spec.host.clone()),
        ]);
        let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // Claude Code keeps its global config in here too, so all of its
        // state lives in the group's mounted .claude folder.
        env.push(format!(
            "{}={}",
            g2_core::wire::ENV_CLAUDE_CONFIG_DIR,
            g2_core::wire::CLAUDE_DIR
        ));
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            user: Some(spec.user.clone()),
            env: Some(env),
            labels: Some(labels),
            working_dir: Some(spec.workdir.clone()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            stdin_once: Some(true),
            tty: Some(false),
            network_disabled: Some(!spec.network),
            host_config: Some(HostConfig {
                mounts: Some(mounts),
                tmpfs: Some(tmpfs),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                memory: Some(spec.limits.memory_bytes),
                memory_swap: Some(spec.limits.memory_bytes),
                nano_cpus: Some(spec.limits.nano_cpus),
                pids_limit: Some(spec.limits.pids),
                network_mode: Some(if spec.network {
                    "bridge".into()
                } else {
                    "none".into()
                }),
                // tini as PID 1: signals reach the agent, orphans are reaped.
                init: Some(true),
                auto_remove: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn start(&self, spec: Spec, input: Vec<u8>) -> Result<Running> {
        let d = &self.docker;
        let opts = CreateContainerOptionsBuilder::default()
            .name(&spec.name)
            .build();
        let created = d
            .create_container(Some(opts), Self::body(&spec))
            .await
            .map_err(engine)?;
        let id = created.id;
        let remove = |id: String, d: Docker| async move {
            let _ = d
                .remove_container(
                    &id,
                    Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                )
                .await;
        };
        let attach = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .build();
        let attached = match d.attach_container(&id, Some(attach)).await {
            Ok(a) => a,
            Err(e) => {
                remove(id, d.clone()).await;
                return Err(engine(e));
            }
        };
        if let Err(e) = d
            .start_container(
                &id,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
        {
            remove(id, d.clone()).await;
            return Err(engine(e));
        }
        let pid = match d
            .inspect_container(
                &id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(i) => i
                .state
                .and_then(|s| s.pid)
                .and_then(|p| u32::try_from(p).ok())
                .filter(|p| *p > 0),
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "could not inspect a started container");
                None
            }
        };
        let (out_tx, out_rx) = mpsc::channel(64);
        let (exit_tx, exit_rx) = oneshot::channel();
        let (task_id, docker) = (id.clone(), d.clone());
        tokio::spawn(async move {
            let mut stdin = attached.input;
            // Input, then end of stdin (`stdin_once`): the runner reads to EOF.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
            let mut output = attached.output;
            while let Some(item) = output.next().await {
                let chunk = match item {
                    Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                        Output::Stdout(message)
                    }
                    Ok(LogOutput::StdErr { message }) => Output::Stderr(message),
                    Ok(_) => continue,
                    Err(_) => break,
                };
                // A caller that stopped listening does not stop the container.
                let _ = out_tx.send(chunk).await;
            }
            drop(out_tx);
            let code = match docker
                .wait_container(
                    &task_id,
                    Some(
                        WaitContainerOptionsBuilder::default()
                            .condition("not-running")
                            .build(),
                    ),
                )
                .next()
                .await
            {
                Some(Ok(r)) => r.status_code,
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
                _ => -1,
            };
            // Read before removal: whether the kernel killed it for memory.
            let oom_killed = docker
                .inspect_container(
                    &task_id,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .ok()
                .and_then(|i| i.state)
                .and_then(|s| s.oom_killed)
                .unwrap_or(false);
            remove(task_id, docker).await;
            let _ = exit_tx.send(super::Exit { code, oom_killed });
        });
        Ok(Running {
            id,
            name: spec.name,
            pid,
            output: out_rx,
            exit: exit_rx,
        })
    }

    async fn stop_inner(&self, id: &str, grace: Duration) -> Result<()> {
        let t = grace.as_secs().min(i32::MAX as u64) as i32;
        match self
            .docker
            .stop_container(
                id,
                Some(StopContainerOptionsBuilder::default().t(t).build()),
            )
            .await
        {
            Ok(()) => Ok(()),
            // Already gone or stopped.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304 | 404,
                ..
            }) => Ok(()),
            Err(e) => {
                let _ = self
                    .docker
                    .remove_container(
                        id,
                        Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                    )
                    .await;
                Err(engine(e))
            }
        }
    }

    /// Removes the containers that `filters` list and `doomed` picks by
    /// their labels; returns their names.
    async fn remove_where(
        &self,
        filters: HashMap<String, Vec<String>>,
        doomed: impl Fn(&HashMap<String, String>) -> bool,
    ) -> Result<Vec<String>> {
        let list = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(engine)?;
        let mut removed = Vec::new();
        for c in list {
            if !doomed(&c.labels.clone().unwrap_or_default()) {
                continue;
            }
            let Some(id) = c.id else { continue };
            let name = c
                .names
                .and_then(|n| n.first().cloned())
                .unwrap_or_else(|| id.clone());
            if self
                .docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                )
                .await
                .is_ok()
            {
                removed.push(name.trim_start_matches('/').to_string());
            }
        }
        Ok(removed)
    }
}

impl ContainerRuntime for DockerRuntime {
    fn run(&self, spec: Spec, input: Vec<u8>) -> BoxFuture<'_, Result<Running>> {
        Box::pin(self.start(spec, input))
    }

    fn stop(&self, id: &str, grace: Duration) -> BoxFuture<'_, Result<()>> {
        let id = id.to_string();
        Box::pin(async move { self.stop_inner(&id, grace).await })
    }

    fn reap(&self, home_label: &str, host: &str) -> BoxFuture<'_, Result<Vec<String>>> {
        let filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{LABEL_HOME}={home_label}")],
        )]);
        let host = host.to_string();
        Box::pin(async move {
            self.remove_where(filters, |labels| {
                labels.get(LABEL_HOST).is_none_or(|h| *h == host)
            })
            .await
        })
    }

    fn evict(
        &self,
        home_label: &str,
        group: &str,
        host: &str,
    ) -> BoxFuture<'_, Result<Vec<String>>> {
        let filters = HashMap::from([(
            "label".to_string(),
            vec![
                format!("{LABEL_HOME}={home_label}"),
                format!("{LABEL_GROUP}={group}"),
            ],
        )]);
        let host = host.to_string();
        Box::pin(async move {
            self.remove_where(filters, |labels| {
                labels.get(LABEL_HOST).is_some_and(|h| *h != host)
            })
            .await
        })
    }
}
