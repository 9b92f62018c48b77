// libsystemc.so's main() refers to sc_main; the tests use GoogleTest's main() and start
// the SystemC kernel with sc_start() themselves, so this is never called.
extern "C" int sc_main(int, char**) { return 1; }
