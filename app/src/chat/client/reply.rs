//! The reply in flight's binding: its bubble, drawn block by block as it streams (or a
//! note, in batch mode), the cards of the calls its elements began as they closed, and
//! its error; under an owner of its own, gone with the reply.

use leptos::prelude::*;

use super::dom::*;
use super::*;
use crate::chat::events::SessionEvents;

impl Chat {
    pub(super) fn reply(&self, feed: SessionEvents) {
        let conversation = feed.conversation;
        // The reply in flight.
        let c = self.clone();
        let live_owner = StoredValue::new_local(None::<Owner>);
        // The reply's own root goes with the chat too.
        on_cleanup(move || {
            if let Some(o) = live_owner.try_update_value(|o| o.take()).flatten() {
                o.cleanup();
            }
        });
        Effect::new(move |_| {
            let live = feed.live.get();
            if let Some(old) = live_owner.try_update_value(|o| o.take()).flatten() {
                old.cleanup();
            }
            c.live_slot.set_text_content(None);
            if let Some(l) = live {
                // Its own root: the effect re-running must not take the reply's effects with it.
                let owner = Owner::new_root(None);
                owner.with(|| c.draw_live(l, conversation));
                live_owner.set_value(Some(owner));
            }
        });
    }

    /// The reply in flight: its blocks as they stream (or a note, in batch mode), the
    /// cards of the calls its elements began as they closed, and its error. Runs under an
    /// owner of its own, cleaned up when the reply leaves.
    fn draw_live(&self, l: LiveView, conversation: RwSignal<CompiledView>) {
        let (id, agent) = (l.message_id.get_value(), l.agent_name.get_value());
        self.live_slot
            .set_inner_html(&hero_shared::html::live_reply_html(&id, &agent));
        let (Some(msg), Some(body), Some(cards)) = (
            find(&self.live_slot, &hooks::LIVE.selector()),
            find(
                &self.live_slot,
                &format!("{} > {}", hooks::LIVE.selector(), hooks::BODY.selector()),
            ),
            find(&self.live_slot, &hooks::LIVE_CALLS.selector()),
        ) else {
            return;
        };
        // The reply's calls, from the log as its frames arrive (their parent is the reply):
        // read by the effects below, each run again when the conversation changes.
        let mid = StoredValue::new(id.clone());
        let calls = move || {
            conversation.with(|v| {
                mid.with_value(|mid| {
                    hero_shared::calls::calls(&v.messages)
                        .into_iter()
                        .filter(|c| c.message_id == *mid)
                        .collect::<Vec<_>>()
                })
            })
        };
        Effect::new(move |_| {
            // Drawn with texts unparsed until the markdown parser is in, then again.
            crate::markdown::track();
            cards.set_inner_html(&hero_shared::html::calls_html(&calls(), &id))
        });
        if self.streaming.get_untracked() {
            // One element per block, each redrawn by an effect of its own as it grows, owned
            // by the reply (not by this effect, which runs again at each new block).
            let owner = Owner::current();
            let drawn = StoredValue::new(0usize);
            Effect::new(move |_| {
                let blocks = l.blocks.get();
                for b in blocks.iter().skip(drawn.get_value()).copied() {
                    let Ok(el) = document().create_element("div") else {
                        return;
                    };
                    let _ = el.set_attribute("class", "live-block");
                    let _ = body.append_child(&el);
                    let draw = move || {
                        // Only an element shows a call: only it follows the calls.
                        Effect::new(move |_| {
                            crate::markdown::track();
                            let html = match b {
                                LiveBlock::Text(_) => crate::chat::live::block_html(b, &[]),
                                LiveBlock::Element { .. } => {
                                    crate::chat::live::block_html(b, &calls())
                                }
                            };
                            el.set_inner_html(&html)
                        });
                    };
                    match &owner {
                        Some(o) => o.with(draw),
                        None => draw(),
                    }
                }
                drawn.set_value(blocks.len());
            });
        } else {
            body.set_inner_html(hero_shared::html::TYPING);
        }
        Effect::new(move |_| error_line(&msg, "msg-error", l.error.get().as_deref(), None));
    }
}
