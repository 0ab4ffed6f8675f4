// The Prometheus text exposition format (version 0.0.4, what Prometheus and its tools scrape and
// parse), for ratelimit.metrics(): metric families, each a # HELP and a # TYPE line followed by
// its samples. Counters are named with the `_total` suffix, as the format's conventions ask.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ratelimit {

using MetricLabels = std::vector<std::pair<std::string_view, std::string_view>>;

class MetricsText {
  public:
    enum class Type { kCounter, kGauge };

    // Starts the family `name` (its samples must follow before the next family).
    void family(std::string_view name, Type type, std::string_view help);
    // One sample of the current family: `name{label="value",...} value`.
    void sample(std::string_view name, const MetricLabels& labels, std::int64_t value);
    void sample(std::string_view name, const MetricLabels& labels, double value);

    const std::string& text() const noexcept { return text_; }

  private:
    void sample_start(std::string_view name, const MetricLabels& labels);
    std::string text_;
};

// A label value as the format writes it between double quotes: backslash, double quote and
// line feed escaped; any other byte as it is.
std::string escape_label_value(std::string_view value);

// Help text: backslash and line feed escaped.
std::string escape_help(std::string_view help);

}  // namespace ratelimit
