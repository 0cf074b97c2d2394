// Lists the functions longer than a limit (80 lines by default) in the repository's C++
// sources, for LayoutTest.FunctionsStayUnder80Lines:
//   function_lengths SOURCE_DIR [LIMIT]
// Exits 1 naming each one (file, line, length), 0 when there is none. A function is a brace
// block opened at namespace or class scope after a parenthesis (a definition, a TEST
// body, a namespace-scope lambda), counted from the line of its opening brace to the line of
// its closing one. Kernels (core/backend, core/kernels) are exempt: their loops are unrolled
// by hand on purpose. Comments, string and character literals (raw strings included) and
// preprocessor lines are skipped before braces are counted.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// `source` with comments, literals and preprocessor lines blanked (newlines kept).
std::string code_only(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  size_t i = 0;
  const size_t n = source.size();
  auto skip_to = [&](size_t end) {
    for (; i < end && i < n; ++i) out += source[i] == '\n' ? '\n' : ' ';
  };
  bool line_start = true;
  while (i < n) {
    char c = source[i];
    if (line_start && c == '#') {
      size_t end = i;
      while (end < n && (source[end] != '\n' || source[end - 1] == '\\')) ++end;
      skip_to(end);
      continue;
    }
    if (c != ' ' && c != '\t') line_start = c == '\n';
    if (source.compare(i, 2, "//") == 0) {
      size_t end = source.find('\n', i);
      skip_to(end == std::string::npos ? n : end);
    } else if (source.compare(i, 2, "/*") == 0) {
      size_t end = source.find("*/", i + 2);
      skip_to(end == std::string::npos ? n : end + 2);
    } else if (c == 'R' && i + 1 < n && source[i + 1] == '"' &&
               (i == 0 || !std::isalnum(static_cast<unsigned char>(source[i - 1])))) {
      size_t open = source.find('(', i);
      std::string close = ")" + source.substr(i + 2, open - i - 2) + "\"";
      size_t end = source.find(close, open);
      skip_to(end == std::string::npos ? n : end + close.size());
    } else if (c == '"' ||
               (c == '\'' &&
                (i == 0 || !std::isxdigit(static_cast<unsigned char>(source[i - 1]))))) {
      size_t end = i + 1;
      while (end < n && source[end] != c && source[end] != '\n') end += source[end] == '\\' ? 2 : 1;
      skip_to(end + 1);
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    bool before =
        at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
    size_t after = at + word.size();
    bool behind = after >= text.size() ||
                  !(std::isalnum(static_cast<unsigned char>(text[after])) || text[after] == '_');
    if (before && behind) return true;
  }
  return false;
}

struct Block {
  enum Kind { kScope, kFunction, kOther } kind;
  int line;
};

// Reports the functions of `path` longer than `limit`; returns how many.
int check_file(const fs::path& path, const std::string& shown, int limit) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string code = code_only(buffer.str());
  std::vector<Block> open;
  std::string head;  // the text since the last ; { or } at this point
  int line = 1;
  int found = 0;
  for (char c : code) {
    if (c == '\n') ++line;
    if (c == '{') {
      bool in_scopes = true;
      for (const Block& b : open) in_scopes = in_scopes && b.kind == Block::kScope;
      bool call = head.find('(') != std::string::npos;
      Block::Kind kind = Block::kOther;
      if (!call &&
          (has_word(head, "namespace") || has_word(head, "class") || has_word(head, "struct") ||
           has_word(head, "union") || has_word(head, "enum") || has_word(head, "extern"))) {
        kind = in_scopes ? Block::kScope : Block::kOther;
      } else if (in_scopes && call) {
        kind = Block::kFunction;
      }
      open.push_back({kind, line});
      head.clear();
    } else if (c == '}') {
      if (!open.empty()) {
        Block block = open.back();
        open.pop_back();
        int length = line - block.line + 1;
        if (block.kind == Block::kFunction && length > limit) {
          std::cout << shown << ":" << block.line << ": a function of " << length << " lines\n";
          ++found;
        }
      }
      head.clear();
    } else if (c == ';') {
      head.clear();
    } else {
      head += c;
    }
  }
  return found;
}

bool exempt(const std::string& relative) {
  return relative.starts_with("core/backend/") || relative.starts_with("core/kernels/");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: function_lengths SOURCE_DIR [LIMIT]\n";
    return 2;
  }
  const fs::path root = argv[1];
  const int limit = argc == 3 ? std::stoi(argv[2]) : 80;
  int found = 0;
  int files = 0;
  for (const char* top : {"include", "core", "io", "checkpoint", "strategies", "estimator", "keras",
                          "tools", "examples", "tests"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const fs::path& path = entry.path();
      std::string ext = path.extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".cu")) continue;
      std::string relative = fs::relative(path, root).string();
      if (exempt(relative) || relative.starts_with("tests/fuzz/corpus")) continue;
      ++files;
      found += check_file(path, relative, limit);
    }
  }
  if (found > 0) {
    std::cout << found << " function(s) past " << limit
              << " lines: name their phases and split them\n";
    return 1;
  }
  std::cout << files << " files, no function past " << limit << " lines\n";
  return 0;
}
