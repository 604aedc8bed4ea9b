//! `containerd-shim-ferrovisor-v1`: containerd's shim v2 for ferrovisor
//! (runtime `io.containerd.ferrovisor.v1`). A thin shell over
//! [`runsc_shim::shim_v2`].

fn main() {
    runsc_shim::shim_v2::main();
}
