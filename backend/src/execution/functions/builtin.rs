//! The functions and capabilities Hero ships with, one line each, and the bus they are routed through: taken by the composition root
//! ([`crate::AppState::new`]) and by tests; nothing in the layers below names a handler.

use std::sync::Arc;

use super::{
    Registry, agent_queue, ask, bash, bus, commands, config, context_file, help, memory, process,
    skills, tasks, update_prompt, user_notify, websearch,
};

/// A registry of every builtin function.
pub fn registry() -> Registry {
    let mut r = Registry::empty();
    r.register(help::Help);
    r.register(websearch::WebSearch);
    r.register(bash::Bash);
    r.register(ask::Ask);
    r.register(update_prompt::UpdatePrompt);
    r.register(context_file::ContextFile);
    r.register(user_notify::UserNotify);
    r.register(agent_queue::AgentQueue);
    r.register(process::LoadProcess);
    r.register(skills::SkillSearch);
    r.register(skills::SkillGet);
    r.register(memory::MemorySearch);
    r.register(memory::MemoryGet);
    r.register(memory::MemoryWrite);
    commands::register(&mut r);
    // The capabilities (reference 004), after Hero's functions in the chain.
    r.add_capability(Arc::new(config::Config));
    r.add_capability(Arc::new(tasks::Tasks));
    r.bus = Arc::new(bus::builtin());
    r
}
