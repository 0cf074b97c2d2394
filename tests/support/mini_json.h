// A strict JSON parser for tests that check what the framework writes (RFC 8259: objects,
// arrays, strings with escapes, numbers, true/false/null; nothing after the value). Throws
// std::runtime_error with the offset of the first mistake. Small on purpose: the library
// itself writes JSON and must not be checked with its own code.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cadre::testing {

struct Json {
  using Object = std::map<std::string, Json>;
  using Array = std::vector<Json>;
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> value;

  bool is_object() const { return std::holds_alternative<Object>(value); }
  bool is_array() const { return std::holds_alternative<Array>(value); }
  bool is_string() const { return std::holds_alternative<std::string>(value); }
  bool is_number() const { return std::holds_alternative<double>(value); }
  const Object& object() const { return std::get<Object>(value); }
  const Array& array() const { return std::get<Array>(value); }
  const std::string& string() const { return std::get<std::string>(value); }
  double number() const { return std::get<double>(value); }
  bool has(const std::string& key) const { return is_object() && object().count(key) != 0; }
  const Json& operator[](const std::string& key) const { return object().at(key); }
};

class JsonParser {
 public:
  static Json parse(std::string_view text) {
    JsonParser p(text);
    p.skip_space();
    Json v = p.value();
    p.skip_space();
    if (p.pos_ != text.size()) p.fail("text after the value");
    return v;
  }

 private:
  explicit JsonParser(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(pos_));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("bad literal");
    pos_ += word.size();
  }

  Json value() {
    switch (peek()) {
      case '{':
        return {object()};
      case '[':
        return {array()};
      case '"':
        return {string()};
      case 't':
        literal("true");
        return {true};
      case 'f':
        literal("false");
        return {false};
      case 'n':
        literal("null");
        return {nullptr};
      default:
        return {number()};
    }
  }

  Json::Object object() {
    Json::Object out;
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return out;
    }
    while (true) {
      skip_space();
      std::string key = string();
      skip_space();
      expect(':');
      skip_space();
      out[key] = value();
      skip_space();
      if (peek() == '}') {
        ++pos_;
        return out;
      }
      expect(',');
    }
  }

  Json::Array array() {
    Json::Array out;
    expect('[');
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return out;
    }
    while (true) {
      skip_space();
      out.push_back(value());
      skip_space();
      if (peek() == ']') {
        ++pos_;
        return out;
      }
      expect(',');
    }
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            char h = text_[pos_++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad \\u escape");
            code = code * 16 +
                   static_cast<unsigned>(std::isdigit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          if (code >= 0x80) fail("only ASCII \\u escapes are supported here");
          out += static_cast<char>(code);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  double number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    } else {
      fail("expected a value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("digits expected after '.'");
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("digits expected in exponent");
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    }
    return std::strtod(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace cadre::testing
