//! The two drivers of time, side by side. Both run the same [`crate::steps::Runtime`]
//! steps; they differ only in when the steps run and which clock says the time.
//!
//! - [`live`]: tokio claim loops, a committer and a tick under the system clock
//!   (`jadpoc run`).
//! - [`scenario`]: one loop in due order under a virtual clock that jumps from one
//!   due time to the next (`jadpoc test`).

pub mod live;
pub mod scenario;
