//! The plan of a redraw of the stored messages, as plain Rust (tested natively): from the
//! slots the list holds (in order, each with the key of the HTML it shows: that HTML with
//! its texts unparsed, `hero_shared::markdown::plain`) and the messages to show now, which
//! slots to make, redraw, take away and move. The client applies it to the DOM
//! (`client::Chat::draw_stored`) and nothing else: a slot is redrawn only when its key
//! changed (a redraw loses what was typed in it and its focus), and only a slot out of
//! order moves (a moved node loses its focus too).

/// One step of a redraw, in the order the client takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotOp {
    /// A new slot for message `id`, drawn with `html` (placed by a later `Move`).
    Make { id: String, html: String },
    /// The slot of `id` shows new HTML.
    Redraw { id: String, html: String },
    /// The slot of `id` is no longer shown.
    Remove { id: String },
    /// The slot of `id` goes before the slot of `before` (none: at the end).
    Move { id: String, before: Option<String> },
}

/// The steps that turn the list `held` (each slot's message id and HTML, in the list's
/// order) into `drawn` (the same, as it should be).
pub fn plan(held: &[(&str, &str)], drawn: &[(String, String)]) -> Vec<SlotOp> {
    use std::collections::HashMap;
    let mut ops = Vec::new();
    // Positions by id (the map `hero_shared::frame` uses too: one copy of its code in the wasm).
    let was: HashMap<&str, usize> = held
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, i))
        .collect();
    let shown: HashMap<&str, usize> = drawn
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id.as_str(), i))
        .collect();
    for (id, html) in drawn {
        match was.get(id.as_str()).map(|&i| held[i].1) {
            None => ops.push(SlotOp::Make {
                id: id.clone(),
                html: html.clone(),
            }),
            Some(old) if old != html => ops.push(SlotOp::Redraw {
                id: id.clone(),
                html: html.clone(),
            }),
            Some(_) => {}
        }
    }
    // What the list holds once the slots no longer shown are gone (new ones are not in it
    // yet: they are placed like any slot out of order).
    let mut list: Vec<&str> = Vec::with_capacity(held.len());
    for &(id, _) in held {
        if shown.contains_key(id) {
            list.push(id);
        } else {
            ops.push(SlotOp::Remove { id: id.to_owned() });
        }
    }
    // Walk the wanted order with a cursor in the list: a slot at the cursor stays, any
    // other is moved before it.
    let mut cursor = 0;
    for (id, _) in drawn {
        if list.get(cursor) == Some(&id.as_str()) {
            cursor += 1;
            continue;
        }
        if let Some(at) = list.iter().position(|l| *l == id) {
            list.remove(at);
            if at < cursor {
                cursor -= 1;
            }
        }
        ops.push(SlotOp::Move {
            id: id.clone(),
            before: list.get(cursor).map(|s| (*s).to_owned()),
        });
        list.insert(cursor, id);
        cursor += 1;
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(i, h)| ((*i).to_owned(), (*h).to_owned()))
            .collect()
    }

    fn plan_of(held: &[(String, String)], drawn: &[(String, String)]) -> Vec<SlotOp> {
        let held: Vec<(&str, &str)> = held.iter().map(|(i, h)| (i.as_str(), h.as_str())).collect();
        plan(&held, drawn)
    }

    /// Applies a plan to a list, as the client does to the DOM.
    fn apply(held: &[(String, String)], ops: &[SlotOp]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = held.to_vec();
        let mut made: Vec<(String, String)> = Vec::new();
        for op in ops {
            match op {
                SlotOp::Make { id, html } => made.push((id.clone(), html.clone())),
                SlotOp::Redraw { id, html } => {
                    if let Some(s) = out.iter_mut().find(|(i, _)| i == id) {
                        s.1 = html.clone();
                    }
                }
                SlotOp::Remove { id } => out.retain(|(i, _)| i != id),
                SlotOp::Move { id, before } => {
                    let slot = match out.iter().position(|(i, _)| i == id) {
                        Some(at) => out.remove(at),
                        None => {
                            let at = made.iter().position(|(i, _)| i == id).unwrap();
                            made.remove(at)
                        }
                    };
                    let at = before
                        .as_ref()
                        .map_or(out.len(), |b| out.iter().position(|(i, _)| i == b).unwrap());
                    out.insert(at, slot);
                }
            }
        }
        out
    }

    #[test]
    fn a_message_added_at_the_end_is_made_and_placed_and_nothing_else_moves() {
        let held = list(&[("a", "A"), ("b", "B")]);
        let drawn = list(&[("a", "A"), ("b", "B"), ("c", "C")]);
        let ops = plan_of(&held, &drawn);
        assert_eq!(
            ops,
            [
                SlotOp::Make {
                    id: "c".into(),
                    html: "C".into()
                },
                SlotOp::Move {
                    id: "c".into(),
                    before: None
                },
            ]
        );
        assert_eq!(apply(&held, &ops), drawn);
    }

    #[test]
    fn only_a_changed_slot_is_redrawn_and_an_unchanged_list_is_left_alone() {
        let held = list(&[("a", "A"), ("b", "B")]);
        assert_eq!(plan_of(&held, &held), []);
        let drawn = list(&[("a", "A"), ("b", "B2")]);
        assert_eq!(
            plan_of(&held, &drawn),
            [SlotOp::Redraw {
                id: "b".into(),
                html: "B2".into()
            }]
        );
    }

    #[test]
    fn a_slot_no_longer_shown_goes_and_the_rest_stay_in_place() {
        let held = list(&[("a", "A"), ("h", "hidden"), ("b", "B")]);
        let drawn = list(&[("a", "A"), ("b", "B")]);
        let ops = plan_of(&held, &drawn);
        assert_eq!(ops, [SlotOp::Remove { id: "h".into() }]);
        assert_eq!(apply(&held, &ops), drawn);
    }

    #[test]
    fn out_of_order_only_the_slots_out_of_place_move() {
        let held = list(&[("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")]);
        // A reply whose calls began while it streamed compiles before them: `d` goes up.
        let drawn = list(&[("a", "A"), ("d", "D"), ("b", "B"), ("c", "C")]);
        let ops = plan_of(&held, &drawn);
        assert_eq!(
            ops,
            [SlotOp::Move {
                id: "d".into(),
                before: Some("b".into())
            }]
        );
        assert_eq!(apply(&held, &ops), drawn);
    }

    #[test]
    fn any_list_becomes_any_other() {
        // Every arrangement of up to five slots, taken from and to one another.
        let ids = ["a", "b", "c", "d", "e"];
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let pick = |n: u64| -> Vec<(String, String)> {
                let mut v: Vec<(String, String)> = ids
                    .iter()
                    .filter(|_| n & 1 == 0 || n.count_ones().is_multiple_of(2))
                    .map(|i| ((*i).to_owned(), format!("{i}{}", n % 3)))
                    .collect();
                let len = v.len();
                for i in (1..len).rev() {
                    v.swap(i, (n as usize >> 3) % (i + 1));
                }
                v.truncate((n as usize >> 7) % (len + 1));
                v
            };
            let (held, drawn) = (pick(next()), pick(next()));
            let ops = plan_of(&held, &drawn);
            assert_eq!(apply(&held, &ops), drawn, "{held:?} -> {drawn:?}: {ops:?}");
        }
    }
}
