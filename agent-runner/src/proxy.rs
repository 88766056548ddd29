//! The model path inside the container: Claude Code speaks HTTP to a
//! loopback port; every connection is spliced onto the group's gateway
//! socket. The container has no network; this is its only way out, and it
//! leads to the host's gateway, which holds the credential.

use std::path::PathBuf;

use tokio::net::{TcpListener, UnixStream};

/// Starts forwarding; returns the loopback port.
pub async fn start(socket: PathBuf) -> std::io::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let socket = socket.clone();
            tokio::spawn(async move {
                match UnixStream::connect(&socket).await {
                    Ok(mut unix) => {
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                    }
                    Err(e) => eprintln!(
                        "g2-agent: model gateway {} unreachable: {e}",
                        socket.display()
                    ),
                }
            });
        }
    });
    Ok(port)
}
