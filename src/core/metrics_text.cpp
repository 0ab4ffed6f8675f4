#include "ratelimit/metrics_text.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ratelimit {

std::string escape_label_value(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string escape_help(std::string_view help) {
    std::string out;
    out.reserve(help.size());
    for (char c : help) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

void MetricsText::family(std::string_view name, Type type, std::string_view help) {
    text_ += "# HELP ";
    text_ += name;
    text_ += ' ';
    text_ += escape_help(help);
    text_ += "\n# TYPE ";
    text_ += name;
    text_ += type == Type::kCounter ? " counter\n" : " gauge\n";
}

void MetricsText::sample_start(std::string_view name, const MetricLabels& labels) {
    text_ += name;
    if (!labels.empty()) {
        text_ += '{';
        bool first = true;
        for (const auto& [label, value] : labels) {
            if (!first)
                text_ += ',';
            first = false;
            text_ += label;
            text_ += "=\"";
            text_ += escape_label_value(value);
            text_ += '"';
        }
        text_ += '}';
    }
    text_ += ' ';
}

void MetricsText::sample(std::string_view name, const MetricLabels& labels, std::int64_t value) {
    sample_start(name, labels);
    text_ += std::to_string(value);
    text_ += '\n';
}

void MetricsText::sample(std::string_view name, const MetricLabels& labels, double value) {
    sample_start(name, labels);
    if (std::isnan(value)) {
        text_ += "NaN";
    } else if (std::isinf(value)) {
        text_ += value > 0 ? "+Inf" : "-Inf";
    } else {
        // The shortest of %.15g .. %.17g that reads back as the same double.
        char buffer[32];
        for (int digits = 15; digits <= 17; ++digits) {
            std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
            if (std::strtod(buffer, nullptr) == value)
                break;
        }
        text_ += buffer;
    }
    text_ += '\n';
}

}  // namespace ratelimit
