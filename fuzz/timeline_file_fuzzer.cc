// Fuzz target: timeline files ('simulate --timeline', 'run --timeline'; read by 'diff' and
// 'profile'), as binary, text and JSON. Whatever parses must round-trip; a timeline that
// carries its plan goes through what diff and profile do with it: the diff against itself,
// the HTML report, the profile and its calibration.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/reports/html_report.h"
#include "pipeplan/simulation/timeline_diff.h"

namespace {

using namespace pipeplan;

void DiffAndProfile(const Plan& plan, const Timeline& timeline) {
  if (DiffTimelines(plan, timeline, timeline).ok()) {
    (void)RenderHtmlReport({ReportEntry{"fuzzed", plan, timeline}}, ReportOptions{});
  }
  const StatusOr<Profile> profile =
      BuildProfile(plan, std::span<const Timeline>(&timeline, 1), ProfileOptions{});
  if (!profile.ok()) return;
  PIPEPLAN_FUZZ_CHECK_OK(ValidateProfile(*profile));
  (void)Calibrate(*profile, CalibrateOptions{});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<TimelineFile> file = ParseTimelineFile(fuzz::AsText(data, size), format);
    if (!file.ok()) continue;
    fuzz::CheckRoundTrip<TimelineFile>(*file, SerializeTimelineFile, ParseTimelineFile);
    if (file->plan) DiffAndProfile(*file->plan, file->timeline);
  }
  return 0;
}
