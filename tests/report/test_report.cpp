// marin report: a short fixture run and a capacity-transport fork of it, overlaid against a
// forecast, rendered by headless Chromium; the page's own script marks every chart it drew with
// the number of data points (and the x-axis, smoothing and log state it drew with), and the tests
// read those marks from the DOM, after driving the page's controls with a script of their own.
// The screenshots are kept in BUILD/test-artifacts/: report.png, the whole page, and
// report-top.png, its top with smoothing on (docs/img/report.png is a copy of it).
// Skipped (with the reason) only when Chromium is absent.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"
#include "report/report.hpp"

using namespace marin;
using namespace marin::testing;
namespace fs = std::filesystem;

namespace {

// The runs every test here reads, made once: A (16 steps, validation every 4, per-domain
// evaluation every 8 — the costly part — checkpoints every 8) and B, forked from A's step 8 with
// the capacity transport (validation only).
struct Fixture {
  TempDir dir{"report"};
  std::string error;
  Fixture() {
    // Three domains of the fixture corpus (two trained on, one evaluation-only), so that the
    // per-domain evaluation of the run takes seconds, not minutes.
    const fs::path fixture = fs::path(MARIN_SOURCE_DIR) / "data/fixture";
    nlohmann::json m = nlohmann::json::parse(read_file((fixture / "manifest.json").string()));
    nlohmann::json keep = nlohmann::json::object();
    for (const char* d : {"bible_kjv", "dict_devil", "brown_press"}) {
      keep[d] = m["domains"][d];
      fs::create_directories(dir.path / "corpus" / d);
      for (auto& s : keep[d]["shards"])
        fs::copy_file(fixture / s["file"].get<std::string>(),
                      dir.path / "corpus" / s["file"].get<std::string>());
    }
    m["domains"] = keep;
    write_file_atomic(dir.str("corpus/manifest.json"), m.dump());
    write_file_atomic(dir.str("mix.toml"),
                      "[[phase]]\nweights = { bible_kjv = 2, dict_devil = 1 }\n");
    RunResult r =
        run("tokenizer train --vocab-size 512 --in " +
            (fixture / "bible_kjv/train-00000.jsonl").string() + " --out " + dir.str("tok.json"));
    if (r.code == 0)
      r = run("tokenize --tokenizer " + dir.str("tok.json") + " --corpus " + dir.str("corpus") +
              " --out " + dir.str("tokens"));
    if (r.code != 0) {
      error = r.out;
      return;
    }
    const std::string data = " --data " + dir.str("mix.toml") + " --token-dir " +
                             dir.str("tokens") + " --tokenizer " + dir.str("tok.json");
    r = run("train --preset tiny" + data +
            " --batch 2 --steps 16 --eval-every 4 --eval-batches 1 --eval-domains-every 8 "
            "--ckpt-every 8 --keep-every 8 --out " +
            dir.str("runA"));
    if (r.code != 0) {
      error = r.out;
      return;
    }
    // After training, marin eval of its last checkpoint, written next to it: the report finds it.
    r = run("eval --checkpoint " + dir.str("runA/checkpoints/step-00000016") + " --token-dir " +
            dir.str("tokens") + " --no-audit --quiet --max-tokens 2000 --json " +
            dir.str("runA/checkpoints/step-00000016/eval.json"));
    if (r.code != 0) {
      error = r.out;
      return;
    }
    r = run("train --fork-from " + dir.str("runA/checkpoints/step-00000008") + data +
            " --preset tiny --batch 2 --steps 16 --eval-every 4 --eval-batches 1 "
            "--ckpt-every 8 --transport capacity --out " +
            dir.str("runB"));
    if (r.code != 0) {
      error = r.out;
      return;
    }
    // A forecast of run A's macro loss (the shape `marin forecast` writes; its fit is tested in
    // test_scaling.cpp): a band at every 4 steps.
    nlohmann::json fits = nlohmann::json::array();
    for (int s = 4; s <= 16; s += 4)
      fits.push_back({{"fraction", s / 16.0},
                      {"target_step", s},
                      {"predicted_loss", 6.3 - 0.02 * s},
                      {"fit", {{"loo", {{"rmse", 0.05}}}}}});
    write_file_atomic(
        dir.str("forecast.json"),
        nlohmann::json({{"fits", fits}, {"prediction", {{"metric", "macro_loss"}}}}).dump());
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// Chromium's DOM of `html` (a file), after `script` (JavaScript run after the page's own script,
// e.g. to drive its controls) and with `fragment` (#…) in the address.
RunResult dom_of(const std::string& browser, const std::string& html, const std::string& script,
                 const std::string& fragment = "") {
  std::string page = read_file(html);
  if (!script.empty()) {
    const size_t end = page.rfind("</body>");
    page.insert(end, "<script>" + script + "</script>\n");
  }
  const std::string copy = html + ".driven.html";
  write_file_atomic(copy, page);
  return run_shell("timeout 120 " + browser +
                   " --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 "
                   "--window-size=1280,3000 --dump-dom 'file://" +
                   copy + fragment + "' 2>/dev/null");
}

std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"})
    if (run_shell(fmt::format("command -v {} >/dev/null", c)).code == 0) return c;
  return "";
}

// Attribute `name` of the element whose data-title is `title`, from Chromium's DOM dump.
std::string attr_of(const std::string& dom, const std::string& title, const std::string& name) {
  const size_t at = dom.find("data-title=\"" + title + "\"");
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind('<', at), close = dom.find('>', at);
  const std::string tag = dom.substr(open, close - open);
  std::smatch m;
  if (std::regex_search(tag, m, std::regex(name + "=\"([^\"]*)\""))) return m[1];
  return "";
}

}  // namespace

TEST(Report, RendersInHeadlessChromiumWithEveryChartFilled) {
  Fixture& f = fixture();
  ASSERT_EQ(f.error, "");
  const std::string html = f.dir.str("report.html");
  RunResult r = run("report " + f.dir.str("runA") + " " + f.dir.str("runB") + " --forecast " +
                    f.dir.str("forecast.json") + " --out " + html);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string page = read_file(html);
  // Self-contained: nothing is fetched (no external script, stylesheet or image).
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);
  EXPECT_NE(page.find("uPlot"), std::string::npos);

  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--virtual-time-budget=10000 --window-size=1280,5200 ";
  r = run_shell(browser + flags + "--dump-dom file://" + html + " 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string& dom = r.out;
  ASSERT_NE(dom.find("data-ready=\"1\""), std::string::npos) << "the page's script did not finish";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      dom, m, std::regex("data-charts=\"(\\d+)\" data-charts-with-data=\"(\\d+)\"")));
  const int charts = std::stoi(m[1]), with_data = std::stoi(m[2]);
  std::printf("chromium: %d charts, %d with data\n", charts, with_data);
  EXPECT_EQ(charts, with_data) << "a chart was drawn without data";
  // Every chart the issue asks for is there and has data points.
  for (const std::string title :
       {"training loss (CE + z-loss)", "cross-entropy (nats/token)", "z (mean logsumexp²)",
        "validation CE and macro loss over the evaluation domains",
        "runA: per-domain CE (the macro loss is their mean)", "learning rate per optimizer group",
        "gradient norm per group",
        "parameter norm per group (MuonH/AdamH: constant by construction)", "tokens / second",
        "routing entropy (nats; ln E is uniform)", "max expert load (× the balanced share)",
        "min expert load (× the balanced share)",
        "drop fraction (capacity transports; 0 when dropless)",
        "QB router bias spread (max − min) per layer, at each checkpoint",
        "forecast (macro_loss): prediction ± leave-one-out RMSE, and the run's points"}) {
    const std::string points = attr_of(dom, title, "data-points");
    EXPECT_FALSE(points.empty()) << "no chart '" << title << "'";
    if (!points.empty()) {
      EXPECT_GT(std::stoi(points), 0) << title;
    }
    EXPECT_EQ(attr_of(dom, title, "data-drawn"), "1") << title;
  }
  // The peak the runs are judged against is that of their dtype and threads, and says so.
  const nlohmann::json run_json = nlohmann::json::parse(read_file(f.dir.str("runA/run.json")));
  const std::string dtype = run_json.at("dtype");
  const int threads = run_json.at("threads");
  ASSERT_GT(threads, 0);
  const bool bf16 = dtype == "bf16" && kernels::cpu_has_avx512_bf16();
  const std::string peak = fmt::format(
      "model FLOP/s as a fraction of the {} peak{} at {} thread{} (", bf16 ? "bf16" : "fp32 FMA",
      dtype == "bf16-emulated"   ? " (bf16 emulated with fp32 FMAs)"
      : dtype == "bf16" && !bf16 ? " (this CPU has no bf16 dot product)"
                                 : "",
      threads, threads == 1 ? "" : "s");
  EXPECT_NE(dom.find(peak), std::string::npos) << peak;
  // Steps count from 1 everywhere: a 16-step run's plots end at 16, its last metrics line says
  // 16, its last checkpoint is step-00000016.
  EXPECT_EQ(attr_of(dom, "training loss (CE + z-loss)", "data-xmax"), "16");
  EXPECT_EQ(attr_of(dom, "training loss (CE + z-loss)", "data-x"), "step");
  const std::string metrics = read_file(f.dir.str("runA/metrics.jsonl"));
  const auto lines = split_lines(metrics);
  ASSERT_EQ(lines.size(), 16u);
  EXPECT_EQ(nlohmann::json::parse(lines.front())["step"], 1);
  EXPECT_EQ(nlohmann::json::parse(lines.back())["step"], 16);
  EXPECT_TRUE(fs::is_directory(f.dir.str("runA/checkpoints/step-00000016")));
  // Both runs are overlaid, the fork's lineage and the per-domain table are shown.
  EXPECT_NE(dom.find("runB loss"), std::string::npos);
  EXPECT_NE(dom.find("fork of "), std::string::npos);
  EXPECT_NE(attr_of(dom, "per-domain", "data-rows"), "");
  // marin eval's results, written after training next to the checkpoint, are found and shown:
  // a table, and the macro loss as a point at its step.
  const std::string evaluated =
      f.dir.str("runA/checkpoints/step-00000016/eval.json") + " (step 16)";
  EXPECT_NE(attr_of(dom, evaluated, "data-rows"), "") << "no table '" << evaluated << "'";
  EXPECT_NE(dom.find("runA marin eval macro_loss"), std::string::npos);
  // Legends show values when not hovered, never uPlot's "--".
  EXPECT_NE(dom.find("class=\"u-value\""), std::string::npos);
  EXPECT_FALSE(std::regex_search(dom, std::regex("class=\"u-value\"[^>]*>--<")))
      << "a legend reads --";

  const fs::path art = fs::path(MARIN_BIN).parent_path().parent_path() / "test-artifacts";
  fs::create_directories(art);
  const std::string shot = (art / "report.png").string();
  fs::remove(shot);
  r = run_shell(browser + flags + "--screenshot=" + shot + " file://" + html);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(shot));
  EXPECT_GT(fs::file_size(shot), 20000u) << "a blank screenshot";
  std::printf("screenshot: %s\n", shot.c_str());
  // The top of the page with the controls set through the address (smoothing on), the picture
  // of docs/img/report.png.
  const std::string top = (art / "report-top.png").string();
  fs::remove(top);
  r = run_shell(browser +
                " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                "--virtual-time-budget=10000 --window-size=1280,1600 --screenshot=" +
                top + " 'file://" + html + "#x=step&ema=0.6&logy=0'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(fs::file_size(top), 20000u) << "a blank screenshot";
  std::printf("screenshot of the top: %s\n", top.c_str());
}

TEST(Report, WriteReportIsTheTrainersHookAndToleratesALineBeingWritten) {
  TempDir dir("report-live");
  write_rows(dir.str("rows.bin"), 32);
  const RunResult t =
      run("train --preset tiny --rows " + dir.str("rows.bin") +
          " --batch 2 --steps 16 --ckpt-every 8 --report-every 8 --out " + dir.str("runA"));
  ASSERT_EQ(t.code, 0) << t.out;
  // The trainer's own report (--report-every), rewritten at steps 8 and 16, keeps the run's
  // peak: measured once per process, not dropped after the first report.
  {
    const std::string page = read_file(dir.str("runA/report.html"));
    const size_t at = page.find("const DATA = ");
    ASSERT_NE(at, std::string::npos);
    const auto data = nlohmann::json::parse(page.substr(at + 13, page.find(";\n", at) - at - 13));
    EXPECT_EQ(data["runs"][0]["columns"]["step"].back(), 16);
    EXPECT_GT(data["runs"][0]["peak"]["gflops"].get<double>(), 0) << data["runs"][0].dump();
  }
  // A run in progress: its last metrics line is half written.
  const std::string run = dir.str("live");
  fs::create_directories(run);
  fs::copy_file(dir.str("runA/run.json"), run + "/run.json");
  std::string metrics = read_file(dir.str("runA/metrics.jsonl"));
  metrics += metrics.substr(0, 40);
  write_file_atomic(run + "/metrics.jsonl", metrics);
  report::ReportOptions o;
  o.measure_peak = false;
  report::write_report({run}, run + "/report.html", o);
  const auto data = nlohmann::json::parse(report::report_data({run}, o));
  EXPECT_EQ(data["runs"][0]["columns"]["step"].size(), 16u);
  EXPECT_EQ(data["runs"][0]["columns"]["step"].back(), 16);  // 1-based: step N after N steps
  // A broken line that is not the last is an error naming the file and line.
  write_file_atomic(run + "/metrics.jsonl", metrics.substr(0, 40) + "\n" + metrics);
  try {
    report::report_data({run}, o);
    ADD_FAILURE() << "a corrupt metrics.jsonl was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:1: not valid JSON: "), std::string::npos)
        << e.what();
  }
  const RunResult r = run_shell(std::string(MARIN_BIN) + " report " + dir.str("nope"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
}

// The run's names, keys and strings go into the page's <script> as JSON: nothing in them may end
// the element or start an HTML comment (the page went blank on a run named `<!--<script`), and a
// non-UTF-8 name is shown with U+FFFD instead of stopping the report.
TEST(Report, EmbeddedDataCannotBreakThePageAndWrongTypesAreNamed) {
  TempDir dir("report-escape");
  const std::string run = dir.str("r<!--<script>&\xff");
  fs::create_directories(run);
  const std::string sep = "\xe2\x80\xa8";  // U+2028
  write_file_atomic(run + "/metrics.jsonl",
                    "{\"step\": 1, \"loss\": 2.5, \"a</script>" + sep + "\": {\"b<!--\": 3}}\n");
  report::ReportOptions o;
  o.measure_peak = false;
  const nlohmann::json data = nlohmann::json::parse(report::report_data({run}, o));
  EXPECT_EQ(data["runs"][0]["name"], "r<!--<script>&\xef\xbf\xbd");
  EXPECT_EQ(data["runs"][0]["columns"]["a</script>" + sep + ".b<!--"][0], 3.0);
  if (report::charts_available()) {
    const std::string html = report::render_report({run}, o);
    const size_t at = html.find("const DATA = ");
    ASSERT_NE(at, std::string::npos);
    const size_t end = html.find(";\n", at);
    const std::string embedded = html.substr(at + 13, end - at - 13);
    for (const char* bad : {"<", ">", "&", "\xe2\x80\xa8"})
      EXPECT_EQ(embedded.find(bad), std::string::npos) << bad;
    EXPECT_EQ(nlohmann::json::parse(embedded), data);
  }
  // A field of the wrong type in run.json names the file and the field.
  write_file_atomic(run + "/run.json", R"({"world_size": "two"})");
  try {
    report::report_data({run}, o);
    ADD_FAILURE() << "a run.json with a string world_size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("/run.json: field \"world_size\" must be a number, not string"),
        std::string::npos)
        << e.what();
  }
}

// A run.json whose model config fails the validation `marin train` applies (ModelConfig::validate)
// is refused naming the file and the field, as a checkpoint's config.json is; a valid one is read.
TEST(Report, RunJsonModelConfigIsValidatedAsTrainValidatesIt) {
  TempDir dir("report-config");
  const std::string run = dir.str("run");
  fs::create_directories(run);
  report::ReportOptions o;
  o.measure_peak = false;
  auto run_json = [&](const std::string& key, nlohmann::json value) {
    nlohmann::json model = ModelConfig::preset("tiny").to_json();
    if (!key.empty()) model[key] = value;
    write_file_atomic(run + "/run.json",
                      nlohmann::json{{"options", {{"model", model}, {"batch", 4}}}}.dump());
  };
  run_json("", nullptr);
  const nlohmann::json data = nlohmann::json::parse(report::report_data({run}, o));
  EXPECT_EQ(data["runs"][0]["model"]["layers"], ModelConfig::preset("tiny").num_layers);
  const struct {
    const char* key;
    nlohmann::json value;
    const char* error;
  } cases[] = {
      {"num_layers", 1000000000, "config field num_layers = 1000000000 is out of range [1, 4096]"},
      {"capacity_factor", 0.0, "config field capacity_factor = 0 is out of range (0, 1024]"},
      {"kv_heads_local", 3, "kv_heads_local (3) must divide num_heads"},
  };
  for (const auto& c : cases) {
    run_json(c.key, c.value);
    try {
      report::report_data({run}, o);
      ADD_FAILURE() << "a run.json with " << c.key << " = " << c.value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(run + "/run.json: options.model: " + c.error),
                std::string::npos)
          << e.what();
    }
  }
}

// The page's controls, driven by a script in the page as a user would (select, range, checkbox,
// then their change events): the x-axis by tokens, EMA smoothing and a log y-axis redraw every
// chart with that state, which is kept in the address; an address with the state opens with it
// (wall-clock axis). The DOM carries, per chart, the x-axis, its last x, the y scale and the
// smoothed last value.
TEST(Report, ControlsSwitchTheXAxisSmoothAndLogScaleInHeadlessChromium) {
  Fixture& f = fixture();
  ASSERT_EQ(f.error, "");
  const std::string html = f.dir.str("controls.html");
  RunResult r =
      run("report " + f.dir.str("runA") + " " + f.dir.str("runB") + " --no-peak --out " + html);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  const std::string loss = "training loss (CE + z-loss)";
  r = dom_of(browser, html, "");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_NE(r.out.find("data-ready=\"1\""), std::string::npos);
  EXPECT_EQ(attr_of(r.out, loss, "data-x"), "step");
  EXPECT_EQ(attr_of(r.out, loss, "data-ema"), "0");
  EXPECT_EQ(attr_of(r.out, loss, "data-ylog"), "0");
  const std::string raw_last = attr_of(r.out, loss, "data-last");
  ASSERT_NE(raw_last, "");

  r = dom_of(browser, html, R"(
    const x = document.getElementById("xaxis"); x.value = "tokens"; x.dispatchEvent(new Event("change"));
    const e = document.getElementById("ema"); e.value = "0.9"; e.dispatchEvent(new Event("input"));
    const l = document.getElementById("logy"); l.checked = true; l.dispatchEvent(new Event("change"));
    document.body.dataset.address = location.hash;)");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string& dom = r.out;
  const int64_t tokens = 16 * 2 * ModelConfig::preset("tiny").seq_len;  // steps × batch × seq_len
  EXPECT_EQ(attr_of(dom, loss, "data-x"), "tokens");
  EXPECT_EQ(attr_of(dom, loss, "data-xmax"), std::to_string(tokens));
  EXPECT_EQ(attr_of(dom, loss, "data-ema"), "0.9");
  EXPECT_EQ(attr_of(dom, loss, "data-ylog"), "1");
  const std::string smoothed = attr_of(dom, loss, "data-last");
  ASSERT_NE(smoothed, "");
  EXPECT_NE(smoothed, raw_last) << "EMA 0.9 left the last value as it was";
  // Every chart was redrawn with the new state, and none lost its data.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      dom, m, std::regex("data-charts=\"(\\d+)\" data-charts-with-data=\"(\\d+)\"")));
  EXPECT_EQ(m[1], m[2]);
  EXPECT_EQ(attr_of(dom, "tokens / second", "data-x"), "tokens");
  EXPECT_NE(dom.find("data-address=\"#x=tokens&amp;ema=0.9&amp;logy=1\""), std::string::npos);
  EXPECT_NE(dom.find("tokens trained on"), std::string::npos);  // the axis label

  // The state in the address: the x-axis by training wall-clock (Σ step_seconds of run A).
  r = dom_of(browser, html, "", "#x=wall&ema=0&logy=0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(attr_of(r.out, loss, "data-x"), "wall");
  double wall = 0;
  const std::string metrics = read_file(f.dir.str("runA/metrics.jsonl"));
  for (std::string_view line : split_lines(metrics))
    if (!line.empty()) wall = wall + nlohmann::json::parse(line)["step_seconds"].get<double>();
  const std::string xmax = attr_of(r.out, loss, "data-xmax");
  ASSERT_NE(xmax, "");
  // The chart's last x is run A's or B's total, whichever is longer.
  EXPECT_GE(std::stod(xmax), wall * (1 - 1e-9));
}

// --watch N rewrites the file every N seconds until interrupted, and only then does the page
// reload itself (a timer of the page's script); runs that appear meanwhile are picked up.
TEST(Report, WatchRewritesTheFileAndThePageReloadsItself) {
  TempDir dir("report-watch");
  fs::create_directories(dir.path / "runs/a");
  write_file_atomic(dir.str("runs/a/metrics.jsonl"), "{\"step\": 1, \"loss\": 3.0}\n");
  const std::string out = dir.str("w.html");
  const RunResult r = run_shell("(" + std::string(MARIN_BIN) + " report " + dir.str("runs") +
                                " --no-peak --watch 1 --out " + out +
                                " & p=$!; sleep 1.5; echo '{\"step\": 2, \"loss\": 2.0}' >> " +
                                dir.str("runs/a/metrics.jsonl") + "; mkdir -p " +
                                dir.str("runs/b") + "; echo '{\"step\": 1, \"loss\": 4.0}' > " +
                                dir.str("runs/b/metrics.jsonl") + "; sleep 2.5; kill $p; wait $p)");
  EXPECT_NE(r.out.find("rewriting it every 1 s"), std::string::npos) << r.out;
  const std::string page = read_file(out);
  EXPECT_NE(page.find("watchReload(1000);"), std::string::npos);
  const size_t at = page.find("const DATA = ");
  ASSERT_NE(at, std::string::npos);
  const auto data = nlohmann::json::parse(page.substr(at + 13, page.find(";\n", at) - at - 13));
  ASSERT_EQ(data["runs"].size(), 2u) << "run b, started while watching, is not in the report";
  EXPECT_EQ(data["runs"][0]["columns"]["step"], nlohmann::json({1, 2}));
  EXPECT_EQ(data["watch_seconds"], 1);
  // Without --watch the page does not reload itself.
  report::ReportOptions o;
  o.measure_peak = false;
  EXPECT_FALSE(std::regex_search(report::render_report({dir.str("runs/a")}, o),
                                 std::regex("watchReload\\(\\d")));
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  // In the browser the timer is set (a 10-minute one here: a page that reloads every second
  // would keep headless Chromium's virtual time from ever running out).
  std::string slow = page;
  slow.replace(slow.find("watchReload(1000);"), 18, "watchReload(600000);");
  write_file_atomic(dir.str("slow.html"), slow);
  const RunResult d = dom_of(browser, dir.str("slow.html"), "");
  EXPECT_NE(d.out.find("data-watch=\"600\""), std::string::npos) << d.out.substr(0, 2000);
}

// Several runs by glob (the shell expands runs/*) or as a directory of runs; entries that are not
// runs are skipped with a note; nothing left is an error naming what was given.
TEST(Report, OverlaysRunsOfAGlobOrADirectoryAndSkipsOtherEntries) {
  TempDir dir("report-runs");
  for (const char* r : {"b", "a"}) {
    fs::create_directories(dir.path / "runs" / r);
    write_file_atomic(dir.str("runs/") + r + "/metrics.jsonl", "{\"step\": 1, \"loss\": 3.0}\n");
  }
  fs::create_directories(dir.path / "runs/empty");
  write_file_atomic(dir.str("runs/notes.txt"), "not a run\n");
  std::vector<std::string> skipped;
  EXPECT_EQ(report::find_runs({dir.str("runs")}, skipped),
            (std::vector<std::string>{dir.str("runs/a"), dir.str("runs/b")}));
  EXPECT_EQ(skipped,
            (std::vector<std::string>{dir.str("runs/empty") + ": not a run directory",
                                      dir.str("runs/notes.txt") + ": not a run directory"}));
  skipped.clear();
  EXPECT_EQ(report::find_runs({dir.str("runs/a"), dir.str("runs/empty"), dir.str("runs/notes.txt"),
                               dir.str("runs/b")},
                              skipped),
            (std::vector<std::string>{dir.str("runs/a"), dir.str("runs/b")}));
  EXPECT_EQ(skipped.size(), 2u);
  // The command line: a directory of runs writes DIR/report.html with both overlaid.
  RunResult r = run("report " + dir.str("runs") + " --no-peak");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped " + dir.str("runs/notes.txt") + ": not a run directory"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("wrote " + dir.str("runs/report.html") + " (2 runs)"), std::string::npos)
      << r.out;
  r = run("report " + dir.str("runs/a") + " " + dir.str("runs/b") + " " +
          dir.str("runs/notes.txt") + " --no-peak --out " + dir.str("g.html"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(2 runs)"), std::string::npos) << r.out;
  r = run("report " + dir.str("runs/empty") + " --no-peak");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no run directory (one with metrics.jsonl or run.json): " +
                       dir.str("runs/empty") + ": no metrics.jsonl or run.json, nor a run in it"),
            std::string::npos)
      << r.out;
}

// The fraction of peak divides by the peak of the run's compute dtype at the run's threads
// (× ranks), measured with marin bench's functions, and its label says which; a run.json that
// does not record them is labelled so.
TEST(Report, PeakMatchesTheRunsDtypeAndThreadsAndSaysSo) {
  TempDir dir("report-peak");
  auto make = [&](const std::string& name, const nlohmann::json& run_json) {
    fs::create_directories(dir.path / name);
    write_file_atomic(dir.str(name + "/metrics.jsonl"), "{\"step\": 1, \"loss\": 3.0}\n");
    write_file_atomic(dir.str(name + "/run.json"), run_json.dump());
    return dir.str(name);
  };
  const std::string bf16 = make("bf16", {{"dtype", "bf16"}, {"threads", 2}, {"world_size", 1}});
  const std::string fp32 = make("fp32", {{"dtype", "fp32"}, {"threads", 1}, {"world_size", 2}});
  const std::string old = make("old", nlohmann::json::object());
  const auto data = nlohmann::json::parse(report::report_data({bf16, fp32, old}));
  const auto& p = data["runs"];
  const bool has_bf16 = kernels::cpu_has_avx512_bf16();
  EXPECT_EQ(p[0]["peak"]["label"], has_bf16 ? "the bf16 peak at 2 threads"
                                            : "the fp32 FMA peak (this CPU has no bf16 dot "
                                              "product) at 2 threads");
  EXPECT_EQ(p[0]["peak"]["dtype"], has_bf16 ? "bf16" : "fp32");
  EXPECT_EQ(p[0]["peak"]["threads"], 2);
  EXPECT_EQ(p[1]["peak"]["label"], "the fp32 FMA peak at 1 thread × 2 ranks");
  EXPECT_EQ(p[1]["peak"]["ranks"], 2);
  EXPECT_NE(p[2]["peak"]["label"].get<std::string>().find(
                "(run.json records no thread count: this process's) (run.json records no dtype: "
                "fp32 assumed)"),
            std::string::npos)
      << p[2]["peak"];
  for (const auto& r : p) EXPECT_GT(r["peak"]["gflops"].get<double>(), 0) << r["peak"];
}

// A metrics.jsonl written before steps counted from 1 (a fresh run's first line is "step": 0) is
// drawn on the one convention, with a note saying so; a current one is drawn as it is.
TEST(Report, OlderZeroBasedMetricsAreShownOneBased) {
  TempDir dir("report-zero");
  fs::create_directories(dir.path / "old");
  fs::create_directories(dir.path / "new");
  write_file_atomic(dir.str("old/metrics.jsonl"),
                    "{\"step\": 0, \"loss\": 3.0}\n{\"step\": 1, \"loss\": 2.0}\n");
  write_file_atomic(dir.str("new/metrics.jsonl"),
                    "{\"step\": 1, \"loss\": 3.0}\n{\"step\": 2, \"loss\": 2.0}\n");
  report::ReportOptions o;
  o.measure_peak = false;
  const auto data = nlohmann::json::parse(report::report_data({dir.str("old"), dir.str("new")}, o));
  EXPECT_EQ(data["runs"][0]["columns"]["step"], nlohmann::json({1, 2}));
  EXPECT_EQ(data["runs"][1]["columns"]["step"], nlohmann::json({1, 2}));
  EXPECT_NE(data["runs"][0].value("note", "").find("counts steps from 0"), std::string::npos);
  EXPECT_FALSE(data["runs"][1].contains("note"));
}
