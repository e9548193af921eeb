//! The hand-made async machinery, in one place: what lets a token cross one task on its way
//! from the provider to the poster's socket, and lets a timer or a stop cost one load per
//! token instead of a registration.
//!
//! - [`events`]: the turn executor. The poster's event stream polls the turn itself
//!   ([`events::TurnEvents`]); a poster that leaves or stops reading hands the turn to a
//!   task of its own, found by one [`events::Watch`] for all turns.
//! - [`abort`]: the stop signal of a turn ([`abort::Abort`]), and its cheap watch.
//! - [`wake`]: waiting cheaply, token after token: [`wake::Alarm`], [`wake::Silence`],
//!   [`wake::Armed`], and the [`wake::Signals`] word whose [`wake::Flag`]s they raise.
//!
//! Their promises are checked by tests that drive the interleavings: `schedules` runs every
//! ordering of a poster's polls, the turn's progress, the watch's ticks and the poster
//! leaving, up to a length, on a paused clock, and checks that every event reaches the
//! poster once and in order (or the poster is told it fell behind), and that the turn
//! finishes exactly once whoever drives it.

pub mod abort;
pub mod events;
pub mod wake;

#[cfg(test)]
mod schedules;
