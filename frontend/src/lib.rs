//! The wasm entry point: takes over the server-rendered page. Nothing else lives here;
//! components are in `app`.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    app::hydrate();
}
