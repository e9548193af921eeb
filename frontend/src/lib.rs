//! The wasm entry point: takes over the server-rendered page. Nothing else lives here;
//! components are in `app`.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    // A panic says what and where in the console (its message and Rust location; no
    // JavaScript stack: the first load is kept small).
    std::panic::set_hook(Box::new(|info| leptos::logging::error!("{info}")));
    app::hydrate();
}
