// One test per bug found by fuzzing (scripts/fuzz.sh) or by the sanitizer runs: the input that
// found it, reduced, and the behaviour now expected. Each names the fuzz target it came from.
#include "compiler/options.h"
#include "fusion/rules.h"
#include "test_util.h"
#include "util/npy.h"

namespace ubfuse {
namespace {

using testing::throws_with;

}  // namespace
}  // namespace ubfuse
