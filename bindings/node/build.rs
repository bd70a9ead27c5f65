//! The linker flags an addon needs (N-API's symbols are the loading process's).

fn main() {
    napi_build::setup();
}
