// The avx512 build of the kernel: its own translation unit, so that the parallel build writes its own object file
// (setup.py; the builds once shared moments.o, and one could overwrite another's).
#include "moments.cpp"
