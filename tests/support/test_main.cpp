// main() of every test executable. As root (how scripts/test runs), the whole process first
// leaves the machine's namespaces for a private network + mount namespace, so no test can touch
// the host; cases that need a node build a fresh one (Node). Unit cases need no privileges.
//
// A run whose filters select no test case fails (exit status 1): doctest reports it as success,
// so a ctest entry (one file: --source-file=...) whose file lost its cases, or whose filter no
// longer matches, would pass while testing nothing. Queries (--list-test-cases, --count, --help)
// run no case and are not affected.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "tests/support/private_node.hpp"

namespace {

/// How many test cases the run's filters selected; nullopt until a run (not a query) ended.
std::optional<unsigned> g_selected;

/// A doctest listener that keeps TestRunStats::numTestCasesPassingFilters at the end of a run.
struct SelectedCases : doctest::IReporter {
  explicit SelectedCases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override { g_selected = stats.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("selected_cases", 1, SelectedCases);

}  // namespace

int main(int argc, char** argv) {
  if (::geteuid() == 0) plumb::test::enter_private_root();
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  if (rc == 0 && g_selected == 0u) {
    std::fprintf(stderr, "[test_main] the filters selected no test case: nothing was tested\n");
    return 1;
  }
  return rc;
}
