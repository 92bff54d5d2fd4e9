// Unit tests of LATENCY's series and texts (server/latency.h) and MONITOR's lines and registry
// (server/monitor.h): the 160-sample ring and its worst-of-the-second rule, RESET, the doctor's
// texts, the graph's layout; sdscatrepr's quoting, AUTH/HELLO redaction, delivery to monitors.
#include <doctest.h>

#include <string>
#include <vector>

#include "server/latency.h"
#include "server/monitor.h"
#include "server/pubsub.h"

using namespace server;

TEST_CASE("latency: a sample per second, the worst of it, 160 kept, all-time high") {
  LatencyMonitor m;
  m.add_if_needed("command", 5, 0, 100);  // threshold 0: off
  m.add_if_needed("command", 5, 10, 100);  // under the threshold
  CHECK(m.empty());
  m.add_if_needed("command", 20, 10, 100);
  m.add_if_needed("command", 15, 10, 100);  // same second, lower: kept 20
  m.add_if_needed("command", 30, 10, 100);  // same second, higher
  auto ts = m.find("command");
  REQUIRE(ts);
  CHECK(ts->in_order().size() == 1);
  CHECK(ts->latest().time_s == 100);
  CHECK(ts->latest().latency_ms == 30);
  CHECK(ts->max_ms == 30);
  for (int64_t s = 101; s < 101 + 200; ++s) m.add_if_needed("command", 11, 10, s);
  ts = m.find("command");
  const auto samples = ts->in_order();
  CHECK(samples.size() == LatencySeries::kLen);
  CHECK(samples.front().time_s == 301 - static_cast<int64_t>(LatencySeries::kLen));
  CHECK(samples.back().time_s == 300);
  CHECK(ts->max_ms == 30);
  CHECK_FALSE(m.find("COMMAND"));  // exact names, as Redis's dict
}

TEST_CASE("latency: RESET by name (any case) or all; LATEST order is first occurrence") {
  LatencyMonitor m;
  m.add_if_needed("command", 20, 10, 1);
  m.add_if_needed("fast-command", 20, 10, 1);
  m.add_command(false, 25'000, 10);
  const auto all = m.all();
  REQUIRE(all.size() == 2);
  CHECK(all[0].first == "command");
  CHECK(all[1].first == "fast-command");
  CHECK(m.reset("nosuch") == 0);
  CHECK(m.reset("FAST-COMMAND") == 1);
  CHECK(m.reset({}) == 1);
  CHECK(m.empty());
}

TEST_CASE("latency: DOCTOR's texts and GRAPH's layout") {
  LatencyMonitor m;
  CHECK(latency_doctor(m, 0, 10000, 10, 1000).starts_with("I'm sorry, Dave, I can't do that."));
  CHECK(latency_doctor(m, 100, 10000, 10, 1000)
            .starts_with("Dave, no latency spike was observed during the lifetime"));
  m.add_if_needed("command", 250, 100, 990);
  const std::string report = latency_doctor(m, 100, 10000, 10, 1000);
  CHECK(report.find("1. command: 1 latency spikes (average 250ms, mean deviation 0ms, period "
                    "10.00 sec). Worst all time event 250ms.\n") != std::string::npos);
  CHECK(report.find("- Check your Slow Log") != std::string::npos);

  const std::string graph = latency_graph("command", *m.find("command"), 1000);
  const std::string head = "command - high 250 ms, low 250 ms (all time high 250 ms)\n" +
                           std::string(80, '-') + "\n";
  REQUIRE(graph.starts_with(head));
  // Four chart rows (one sample at the bottom), the label margin, then "10s" top-down.
  CHECK(graph.substr(head.size()) == " \n \n \n_\n \n1\n0\ns\n");
}

TEST_CASE("monitor: sdscatrepr quoting") {
  std::string out;
  append_repr(out, std::string_view("a\"b\\c\n\r\t\a\b\x01\xff z", 14));
  CHECK(out == "\"a\\\"b\\\\c\\n\\r\\t\\a\\b\\x01\\xff z\"");
}

TEST_CASE("monitor: the line, with AUTH and HELLO credentials redacted as Redis 7.0 does") {
  auto line = [](std::vector<std::string_view> args) {
    return monitor_line(1700000000'000123, "127.0.0.1:5555", args);
  };
  CHECK(line({"SET", "k", "v"}) == "1700000000.000123 [0 127.0.0.1:5555] \"SET\" \"k\" \"v\"\r\n");
  CHECK(line({"auth", "pw"}) == "1700000000.000123 [0 127.0.0.1:5555] \"auth\" \"(redacted)\"\r\n");
  CHECK(line({"AUTH", "u", "pw"}).ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
  CHECK(line({"AUTH", "a", "b", "c"}).ends_with("\"AUTH\" \"a\" \"b\" \"c\"\r\n"));
  CHECK(line({"HELLO", "3", "SETNAME", "n", "AUTH", "u", "p"})
            .ends_with("\"HELLO\" \"3\" \"SETNAME\" \"n\" \"AUTH\" \"(redacted)\" "
                       "\"(redacted)\"\r\n"));
  CHECK(line({"HELLO", "9", "AUTH", "u", "p"}).ends_with("\"AUTH\" \"u\" \"p\"\r\n"));
  CHECK(line({"HELLO", "3", "AUTH", "u"}).ends_with("\"AUTH\" \"u\"\r\n"));  // too few: syntax
}

TEST_CASE("monitor: every monitor gets each line as a '+' frame; removed ones no more") {
  Monitors monitors;
  CHECK_FALSE(monitors.active());
  auto a = std::make_shared<Subscriber>(Subscriber::Hooks{});
  auto b = std::make_shared<Subscriber>(Subscriber::Hooks{});
  CHECK(monitors.add(a));
  CHECK_FALSE(monitors.add(a));
  CHECK(monitors.add(b));
  CHECK(monitors.count() == 2);
  const std::vector<std::string_view> args = {"GET", "k"};
  monitors.feed("lua", args);
  CHECK(monitors.remove(b.get()));
  CHECK_FALSE(monitors.remove(b.get()));
  monitors.feed("lua", args);
  std::vector<MessageRef> got;
  a->take(&got);
  REQUIRE(got.size() == 2);
  CHECK(got[0]->type(3) == '+');
  CHECK(got[0]->body().ends_with(" [0 lua] \"GET\" \"k\"\r\n"));
  got.clear();
  b->take(&got);
  CHECK(got.size() == 1);
}
