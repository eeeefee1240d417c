// main() of every privileged integration test: leave the host's namespaces first, then run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/support/private_node.hpp"

int main(int argc, char** argv) {
  plumb::test::enter_private_root();
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
