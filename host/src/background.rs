//! A task that runs until it is told to stop: the gateway's listeners and
//! the IPC watchers. [`Background::stop`] signals and waits for the task;
//! dropping the handle signals without waiting.

use std::future::Future;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Resolves (to `Ok` or, when the handle is gone, `Err`) once stop is asked.
pub type StopSignal = oneshot::Receiver<()>;

pub struct Background {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Background {
    /// Spawns `run`, which must end soon after its [`StopSignal`] resolves.
    pub fn spawn<F, Fut>(run: F) -> Self
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, signal) = oneshot::channel();
        Background {
            stop: Some(stop),
            task: tokio::spawn(run(signal)),
        }
    }

    /// Asks the task to stop and waits until it has.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}
