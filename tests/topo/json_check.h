// A tiny JSON reader for checking mkccl-topo --json: objects, arrays, strings, numbers, true,
// false, null. Strict enough to reject what a real parser would (trailing commas, bare words).
#pragma once
#include <stdlib.h>
#include <string.h>
#include <map>
#include <string>
#include <vector>

namespace mkccl {
namespace test {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  std::vector<std::string> keys;  // object keys in order

  const Json& operator[](const std::string& k) const {
    static const Json none;
    auto it = obj.find(k);
    return it == obj.end() ? none : it->second;
  }
  const Json& operator[](size_t i) const { return arr.at(i); }
};

class JsonReader {
 public:
  // true and *out filled if `text` is exactly one JSON value (surrounding whitespace allowed).
  static bool parse(const std::string& text, Json* out, std::string* err) {
    JsonReader r(text);
    if (!r.value(out) || (r.ws(), r.p_ != r.s_.size())) {
      *err = "invalid JSON near offset " + std::to_string(r.p_);
      return false;
    }
    return true;
  }

 private:
  explicit JsonReader(const std::string& s) : s_(s) {}
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\n' || s_[p_] == '\t' || s_[p_] == '\r')) p_++;
  }
  bool lit(const char* w) {
    size_t n = strlen(w);
    if (s_.compare(p_, n, w) != 0) return false;
    p_ += n;
    return true;
  }
  bool string(std::string* out) {
    if (p_ >= s_.size() || s_[p_] != '"') return false;
    p_++;
    while (p_ < s_.size() && s_[p_] != '"') {
      char c = s_[p_++];
      if ((unsigned char)c < 0x20) return false;
      if (c == '\\') {
        if (p_ >= s_.size()) return false;
        char e = s_[p_++];
        if (e == 'u') {
          if (p_ + 4 > s_.size()) return false;
          *out += (char)strtol(s_.substr(p_, 4).c_str(), nullptr, 16);  // ASCII is all we write
          p_ += 4;
        } else if (e == 'n') {
          *out += '\n';
        } else if (e == 't') {
          *out += '\t';
        } else if (e == '"' || e == '\\' || e == '/') {
          *out += e;
        } else {
          return false;
        }
      } else {
        *out += c;
      }
    }
    if (p_ >= s_.size()) return false;
    p_++;
    return true;
  }
  bool value(Json* v) {
    ws();
    if (p_ >= s_.size()) return false;
    char c = s_[p_];
    if (c == '{') {
      v->kind = Json::Object;
      p_++;
      ws();
      if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
      while (true) {
        ws();
        std::string k;
        if (!string(&k)) return false;
        ws();
        if (p_ >= s_.size() || s_[p_++] != ':') return false;
        Json child;
        if (!value(&child) || v->obj.count(k)) return false;
        v->keys.push_back(k);
        v->obj[k] = child;
        ws();
        if (p_ < s_.size() && s_[p_] == ',') { p_++; continue; }
        if (p_ < s_.size() && s_[p_] == '}') return ++p_, true;
        return false;
      }
    }
    if (c == '[') {
      v->kind = Json::Array;
      p_++;
      ws();
      if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
      while (true) {
        Json child;
        if (!value(&child)) return false;
        v->arr.push_back(child);
        ws();
        if (p_ < s_.size() && s_[p_] == ',') { p_++; continue; }
        if (p_ < s_.size() && s_[p_] == ']') return ++p_, true;
        return false;
      }
    }
    if (c == '"') {
      v->kind = Json::String;
      return string(&v->str);
    }
    if (lit("true")) { v->kind = Json::Bool; v->b = true; return true; }
    if (lit("false")) { v->kind = Json::Bool; return true; }
    if (lit("null")) return true;
    const char* start = s_.c_str() + p_;
    char* end = nullptr;
    v->num = strtod(start, &end);
    if (end == start || !(c == '-' || (c >= '0' && c <= '9'))) return false;
    v->kind = Json::Number;
    p_ += end - start;
    return true;
  }
  const std::string& s_;
  size_t p_ = 0;
};

}  // namespace test
}  // namespace mkccl
