"""Spark DDL schema strings -> :class:`~ckptfix.formats.unsaferow.StructType`.

Accepts what Spark's ``StructType.fromDDL`` (``CatalystSqlParser.parseTableSchema``) accepts
for the types UnsafeRow decoding supports, checked against Spark 4.3::

    schema   = column ("," column)*
    column   = name type [NOT NULL] [COMMENT string]
    field    = name [":"] type [NOT NULL] [COMMENT string]       (inside STRUCT<...>)
    type     = ARRAY<type> | MAP<type, type> | STRUCT<[field ("," field)*]> | atomic
    name     = [A-Za-z0-9_]+ (not all digits) | `...` with `` for a backquote

Atomic types, case-insensitive: BOOLEAN; TINYINT, BYTE; SMALLINT, SHORT; INT, INTEGER;
BIGINT, LONG; FLOAT, REAL; DOUBLE; DATE; TIMESTAMP, TIMESTAMP_LTZ; TIMESTAMP_NTZ; STRING;
BINARY; VOID; DECIMAL, DEC, NUMERIC with (p), (p, s) or nothing (10, 0), 0 <= s <= p <= 38;
CHAR(n) and VARCHAR(n) become STRING (Spark keeps them as char/varchar in the schema but
stores a plain string in rows). A COMMENT becomes the field's ``{"comment": ...}`` metadata;
string literals take '...' or "..." with backslash escapes, '' inside '...', an ``r`` prefix
for raw text, and adjacent literals concatenate. ``--`` and ``/* */`` comments are blanks.

Errors are :class:`~ckptfix.errors.FormatError` with kind ``bad-ddl``, ``path`` the label
given (say ``<--key-schema>``) and ``offset`` the character offset in the string.
"""

from __future__ import annotations

from typing import Any

from ckptfix.errors import FormatError
from ckptfix.formats.unsaferow import (
    MAX_PRECISION,
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

KIND = "bad-ddl"
DEFAULT_DECIMAL = DecimalType(10, 0)

ATOMIC: dict[str, DataType] = {
    "boolean": BooleanType(),
    "tinyint": ByteType(),
    "byte": ByteType(),
    "smallint": ShortType(),
    "short": ShortType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
    "string": StringType(),
    "binary": BinaryType(),
    "void": NullType(),
}
DECIMAL_NAMES = ("decimal", "dec", "numeric")
CHAR_NAMES = ("char", "varchar")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\"}
_KEEP_BACKSLASH = ("%", "_")  # LIKE wildcards keep their backslash
_OCTAL_FIRST, _OCTAL = "0123", "01234567"
_HEX = frozenset("0123456789abcdefABCDEF")


def _shown(text: str, pos: int) -> str:
    if pos >= len(text):
        return "the end of the string"
    return repr(text[pos : pos + 20])


class _Parser:
    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label
        self.pos = 0

    # ------------------------------------------------------------------ lexical helpers

    def fail(self, expected: str, at: int | None = None) -> FormatError:
        pos = self.pos if at is None else at
        return FormatError(self.label, pos, expected, _shown(self.text, pos), kind=KIND)

    def blanks(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c.isspace():
                self.pos += 1
            elif text.startswith("--", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                start, depth = self.pos, 0
                while self.pos < n:
                    if text.startswith("/*", self.pos):
                        depth += 1
                        self.pos += 2
                    elif text.startswith("*/", self.pos):
                        depth -= 1
                        self.pos += 2
                        if depth == 0:
                            break
                    else:
                        self.pos += 1
                if depth:
                    raise self.fail("the end of a /* comment */", start)
            else:
                return

    def peek(self, char: str) -> bool:
        self.blanks()
        return self.text.startswith(char, self.pos)

    def expect(self, char: str, what: str) -> None:
        if not self.peek(char):
            raise self.fail(what)
        self.pos += len(char)

    def word(self) -> tuple[str, int]:
        """The next unquoted word ([A-Za-z0-9_]+) and where it starts; '' if none."""
        self.blanks()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WORD:
            self.pos += 1
        return self.text[start : self.pos], start

    def keyword(self, name: str) -> bool:
        """Consume ``name`` (case-insensitive) if it is the next word."""
        save = self.pos
        word, _ = self.word()
        if word.lower() == name:
            return True
        self.pos = save
        return False

    def integer(self, what: str) -> int:
        word, start = self.word()
        if not word.isdigit():
            raise self.fail(what, start)
        return int(word)

    def name(self) -> str:
        self.blanks()
        start = self.pos
        if self.text.startswith("`", start):
            out: list[str] = []
            i = start + 1
            while True:
                end = self.text.find("`", i)
                if end < 0:
                    raise self.fail("a closing backquote", start)
                out.append(self.text[i:end])
                if self.text.startswith("``", end):
                    out.append("`")
                    i = end + 2
                    continue
                self.pos = end + 1
                return "".join(out)
        word, _ = self.word()
        if not word or word.isdigit():
            self.pos = start
            raise self.fail("a column name (letters, digits, _ or `quoted`)")
        return word

    def string(self) -> str:
        """One or more adjacent string literals, concatenated."""
        parts: list[str] = []
        while True:
            self.blanks()
            start = self.pos
            raw = self.text[start : start + 1] in ("r", "R") and self.text[start + 1 : start + 2] in ("'", '"')
            quote_at = start + 1 if raw else start
            quote = self.text[quote_at : quote_at + 1]
            if quote not in ("'", '"'):
                if parts:
                    return "".join(parts)
                raise self.fail("a string literal ('...' or \"...\")")
            self.pos = quote_at + 1
            parts.append(self._literal_body(quote, raw, start))

    def _literal_body(self, quote: str, raw: bool, start: int) -> str:
        text, n = self.text, len(self.text)
        out: list[str] = []
        while True:
            if self.pos >= n:
                raise self.fail(f"a closing {quote}", start)
            c = text[self.pos]
            if c == quote:
                if text.startswith(quote, self.pos + 1) and not raw:
                    out.append(quote)
                    self.pos += 2
                    continue
                self.pos += 1
                return "".join(out)
            if c == "\\" and not raw and self.pos + 1 < n:
                out.append(self._escape())
                continue
            out.append(c)
            self.pos += 1

    def _escape(self) -> str:
        text, i = self.text, self.pos + 1
        c = text[i]
        if c == "u" and len(text) >= i + 5 and all(h in _HEX for h in text[i + 1 : i + 5]):
            self.pos = i + 5
            return chr(int(text[i + 1 : i + 5], 16))
        digits = text[i : i + 3]
        if len(digits) == 3 and digits[0] in _OCTAL_FIRST and all(d in _OCTAL for d in digits[1:]):
            self.pos = i + 3
            return chr(int(digits, 8))
        self.pos = i + 1
        if c in _KEEP_BACKSLASH:
            return "\\" + c
        return _ESCAPES.get(c, c)

    # ------------------------------------------------------------------ grammar

    def schema(self) -> StructType:
        fields = [self.field(colon=False)]
        while self.peek(","):
            self.pos += 1
            fields.append(self.field(colon=False))
        self.blanks()
        if self.pos < len(self.text):
            raise self.fail("',' and another column, or the end of the schema")
        return StructType(tuple(fields))

    def field(self, colon: bool) -> StructField:
        name = self.name()
        if colon and self.peek(":"):
            self.pos += 1
        data_type = self.data_type()
        nullable = True
        if self.keyword("not"):
            if not self.keyword("null"):
                raise self.fail("NULL after NOT")
            nullable = False
        metadata: dict[str, Any] = {}
        if self.keyword("comment"):
            metadata["comment"] = self.string()
        return StructField(name, data_type, nullable, metadata)

    def data_type(self) -> DataType:
        word, start = self.word()
        name = word.lower()
        if not name:
            raise self.fail("a data type")
        if name == "array":
            self.expect("<", "'<' after ARRAY")
            element = self.data_type()
            self.expect(">", "'>' closing ARRAY<")
            return ArrayType(element)
        if name == "map":
            self.expect("<", "'<' after MAP")
            key = self.data_type()
            self.expect(",", "',' between the MAP key and value types")
            value = self.data_type()
            self.expect(">", "'>' closing MAP<")
            return MapType(key, value)
        if name == "struct":
            self.expect("<", "'<' after STRUCT")
            fields: list[StructField] = []
            if not self.peek(">"):
                fields.append(self.field(colon=True))
                while self.peek(","):
                    self.pos += 1
                    fields.append(self.field(colon=True))
            self.expect(">", "',' and another field, or '>' closing STRUCT<")
            return StructType(tuple(fields))
        params_at = self.pos
        params = self.params()
        if name in DECIMAL_NAMES:
            return self.decimal(params, params_at)
        if name in CHAR_NAMES:
            if len(params) != 1:
                raise self.fail(f"{name.upper()}(length)", params_at)
            return StringType()
        if name not in ATOMIC:
            raise self.fail("a data type ckptfix can decode (see ckptfix.formats.ddl)", start)
        if params:
            raise self.fail(f"{name.upper()} without parameters", params_at)
        return ATOMIC[name]

    def params(self) -> list[int]:
        if not self.peek("("):
            return []
        self.pos += 1
        values = [self.integer("an unsigned integer")]
        while self.peek(","):
            self.pos += 1
            values.append(self.integer("an unsigned integer"))
        self.expect(")", "')' or ',' and another integer")
        return values

    def decimal(self, params: list[int], at: int) -> DecimalType:
        if not params:
            return DEFAULT_DECIMAL
        if len(params) > 2:
            raise self.fail("DECIMAL(precision) or DECIMAL(precision, scale)", at)
        precision, scale = params[0], params[1] if len(params) == 2 else 0
        if precision > MAX_PRECISION or scale > precision:
            raise self.fail(f"a decimal with scale <= precision <= {MAX_PRECISION}", at)
        return DecimalType(precision, scale)


def parse_ddl(text: str, label: str = "<ddl>") -> StructType:
    """The StructType of a DDL schema string such as ``"k STRING, n BIGINT NOT NULL"``."""
    return _Parser(text, label).schema()


def parse_data_type(text: str, label: str = "<ddl>") -> DataType:
    """One DDL data type, such as ``"MAP<STRING, ARRAY<INT>>"``."""
    parser = _Parser(text, label)
    t = parser.data_type()
    parser.blanks()
    if parser.pos < len(text):
        raise parser.fail("the end of the data type")
    return t
