#include "kvrt/jinja/lexer.h"

#include <array>
#include <cctype>
#include <cstdint>

#include "kvrt/generation/utf8.h"

namespace kvrt::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Jinja turns \r\n and \r into \n.
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {}

  Result<std::vector<Token>> run() {
    bool strip_leading = false;  // the previous tag ended with '-'
    bool line_start = true;      // the text begins a line (template start, or after '\n')
    while (pos_ < src_.size()) {
      const size_t open = find_tag(pos_);
      const int text_line = line_;
      std::string text(src_.substr(pos_, open - pos_));
      if (strip_leading) {
        size_t i = 0;
        while (i < text.size() && is_space(text[i])) ++i;
        text.erase(0, i);
      }
      if (open == src_.size()) {
        emit_text(std::move(text), text_line);
        break;
      }
      const char type = src_[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+' && type != '{') {
        lstrip_line(text, line_start);
      }
      emit_text(std::move(text), text_line);
      count_lines(pos_, open);
      pos_ = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      bool trim_after = false;
      if (type == '#') {
        KVRT_ASSIGN_OR_RETURN(trim_after, skip_comment(strip_leading));
      } else {
        KVRT_ASSIGN_OR_RETURN(trim_after, lex_tag(type == '{', strip_leading));
      }
      if (trim_after && pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;
        ++line_;
      }
      line_start = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({TokenKind::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs between the line start and a block tag go.
  static void lstrip_line(std::string& text, bool line_start) {
    const size_t newline = text.rfind('\n');
    const size_t begin = newline == std::string::npos ? 0 : newline + 1;
    if (newline == std::string::npos && !line_start) return;
    for (size_t i = begin; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t') return;
    }
    text.erase(begin);
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::move(text), line});
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (src_[i] == '\n') ++line_;
    }
  }

  // Returns whether trim_blocks applies after the tag.
  Result<bool> skip_comment(bool& strip_leading) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) {
      return invalid_argument("line ", line_, ": unterminated comment '{#'");
    }
    count_lines(pos_, close);
    strip_leading = close > pos_ && src_[close - 1] == '-';
    const bool keep = close > pos_ && src_[close - 1] == '+';
    pos_ = close + 2;
    return !strip_leading && !keep;
  }

  Result<bool> lex_tag(bool variable, bool& strip_leading) {
    const int begin_line = line_;
    tokens_.push_back({variable ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line_});
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        return invalid_argument("line ", begin_line, ": unterminated tag '", variable ? "{{" : "{%",
                                "'");
      }
      const std::string_view rest = src_.substr(pos_);
      const std::string_view close = variable ? "}}" : "%}";
      const bool closes = variable ? depth == 0 : true;
      if (closes) {
        for (const char mod : {'-', '+', '\0'}) {
          const size_t skip = mod ? 1 : 0;
          if ((mod == '\0' || (!rest.empty() && rest[0] == mod)) && rest.substr(skip, 2) == close) {
            tokens_.push_back({variable ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_});
            pos_ += skip + 2;
            strip_leading = mod == '-';
            // trim_blocks applies to block tags only, and not after '+%}' or '-%}'.
            return !variable && mod == '\0';
          }
        }
      }
      KVRT_RETURN_IF_ERROR(lex_token(depth));
    }
  }

  Status lex_token(int& depth) {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
        ++end;
      }
      tokens_.push_back({TokenKind::kName, std::string(src_.substr(pos_, end - pos_)), line_});
      pos_ = end;
      return Status();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (c == '\'' || c == '"') return lex_string();
    static constexpr std::array<std::string_view, 25> kOperators = {
        "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
        ">",  "(",  ")",  "[",  "]",  "{",  "}", ",", ":", ".", "|", "="};
    for (std::string_view op : kOperators) {
      if (src_.substr(pos_, op.size()) == op) {
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        tokens_.push_back({TokenKind::kOperator, std::string(op), line_});
        pos_ += op.size();
        return Status();
      }
    }
    return invalid_argument("line ", line_, ": unexpected character '", std::string(1, c),
                            "' in tag");
  }

  Status lex_number() {
    size_t end = pos_;
    auto digits = [&] {
      while (end < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
        ++end;
      }
    };
    digits();
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && std::isdigit(static_cast<unsigned char>(src_[exp]))) {
        is_float = true;
        end = exp;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, text, line_});
    pos_ = end;
    return Status();
  }

  // Python string literal escapes, as Jinja decodes them ("unicode-escape").
  Status lex_string() {
    const char quote = src_[pos_];
    const int start_line = line_;
    std::string value;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) {
        return invalid_argument("line ", start_line, ": unterminated string literal");
      }
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        value += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '0':
          value += '\0';
          break;
        case '\n':
          ++line_;
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const int h = i + k < src_.size() ? hex_value(src_[i + k]) : -1;
            if (h < 0) return invalid_argument("line ", line_, ": bad \\", e, " escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return invalid_argument("line ", line_, ": escape is not a Unicode scalar value");
          }
          utf8::append(value, cp);
          i += n;
          break;
        }
        default:  // unknown escapes stay as written, as in Python
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(value), start_line});
    pos_ = i + 1;
    return Status();
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  // Jinja reads the source line by line: newlines become \n, and without
  // keep_trailing_newline one final newline is dropped.
  std::string normalized = normalize_newlines(source);
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(normalized).run();
}

}  // namespace kvrt::jinja
