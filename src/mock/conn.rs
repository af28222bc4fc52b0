//! Per-connection control: lets a fault tear a connection down with a TCP RST instead of a
//! clean close. The request path sets the flag and ends the response with an error; hyper then
//! drops the connection, and dropping [`ConnIo`] with the flag set arms `SO_LINGER 0` first,
//! so the kernel sends RST — what clients see when a provider's load balancer drops them.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Shared between a connection's IO and the requests on it.
#[derive(Debug, Default)]
pub(crate) struct ConnCtl {
    reset: AtomicBool,
}

impl ConnCtl {
    /// Asks for the connection to be reset (RST) when it closes.
    pub(crate) fn reset_on_close(&self) {
        self.reset.store(true, Ordering::Relaxed);
    }
}

/// A connection's socket, with reset-on-drop.
#[derive(Debug)]
pub(super) struct ConnIo {
    io: TokioIo<TcpStream>,
    ctl: Arc<ConnCtl>,
}

impl ConnIo {
    /// Wraps an accepted socket.
    pub(super) fn new(stream: TcpStream, ctl: Arc<ConnCtl>) -> Self {
        Self { io: TokioIo::new(stream), ctl }
    }
}

impl Drop for ConnIo {
    fn drop(&mut self) {
        if self.ctl.reset.load(Ordering::Relaxed) {
            let _ = self.io.inner().set_zero_linger();
        }
    }
}

impl hyper::rt::Read for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for ConnIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}
