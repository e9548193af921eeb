//! What reaches outside Hero's own process, and who may make it.
//!
//! - [`egress`]: where outbound requests may go, and the one client that sends them.
//! - [`sandbox`]: commands in a sandbox that fails closed (bubblewrap, Landlock, seccomp,
//!   rlimits, a workspace quota).
//! - [`functions`]: the function registry (`help`, `websearch`, `bash`, …): specs, schemas,
//!   handlers, and the builtin set.
//! - [`plugins`]: the plugins an administrator installed: their manifests, their state and
//!   the abilities they export.
//! - [`mcp`]: each user's MCP servers (a stdio program in their sandbox, or a URL behind
//!   the egress policy) as capabilities of their own chain ([`mcp::registry`]).
//! - [`permissions`]: each user's level for each function, over its default, and the list of
//!   functions a user's agents are offered.
//!
//! May use the leaves, [`crate::store`] and [`crate::accounts`]; a handler of
//! [`functions`] may also use what it acts on (an agent's context files, an answer).
//! Invariant: every outbound request goes through [`egress::Outbound`], and every command
//! through [`sandbox::Sandbox`].

pub mod egress;
pub mod functions;
pub mod mcp;
pub mod permissions;
pub mod plugins;
pub mod sandbox;
