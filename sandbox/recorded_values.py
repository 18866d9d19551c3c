"""Plain data across the sandbox's wall: `encode` runs inside it (this file is copied into the box and
imports nothing but the standard library), `decode` runs outside.

A value is encoded only if its type is exactly one of: None, bool, int, float, complex, str, bytes,
list, tuple, set, frozenset, dict, Counter, OrderedDict, defaultdict (of encodable values), Decimal,
Fraction, datetime's date/time/datetime/timedelta, a builtin type (int, str, ...: a dtype as pandas
tells it), a numpy scalar, dtype, matrix or ndarray (structured ones too), a pandas Series, DataFrame,
Index (Range, Multi, Datetime, ...), Interval, Timestamp, Timedelta, NaT or NA.
Exactly: a subclass (an int whose __eq__ says yes to everything, a list with a custom __len__) is not
plain data, with three exceptions that are read without running their class's code for the value:
- an iterator (a generator, `map`, `itertools.product`, ...): its items, drawn here as the check's
  own `list(it)` would draw them, decoded as an iterator over them;
- a namedtuple (a tuple subclass that keeps tuple's comparisons): its items, decoded as a tuple;
- an instance of a plain class (`class Item: ...`, no base but object, object's own __eq__): its class's
  name and its attributes, decoded as a RecordedObject equal to another of the same class and equal
  attributes. Python compares such objects by identity, which does not cross processes; a candidate
  that returns equal copies of the test's objects therefore passes where Python's `==` says no.
  ElementTree's Element is read the same way, and bs4's Tag as its markup (_library_value).
Anything else is encoded as its type's name only, and decodes to an `Unrecorded` whose every
comparison, truth test or arithmetic raises, so a check that uses it fails.
Encoding reads values through the types' own C-level accessors; what a hostile process writes instead
is only ever a claim about values, compared outside with values it never held.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import json
import sys

MAX_CHARS = 1 << 18  # one encoded value; a larger one is recorded as too large (the check fails)


class _TooLarge(Exception):
  pass


_NUMPY_SCALARS: frozenset = frozenset()


def _numpy_scalar_types(np) -> frozenset:
  global _NUMPY_SCALARS
  if not _NUMPY_SCALARS:  # once per process: every numpy value asks
    _NUMPY_SCALARS = frozenset(t for t in set(np.sctypeDict.values()) if t.__module__ == "numpy")
  return _NUMPY_SCALARS


def _dtype(np, dtype) -> object:
  """A dtype as JSON: its str, or a structured dtype's descr (field names, types, shapes)."""
  if dtype.kind != "V":
    return dtype.str
  if dtype.names is None:
    raise TypeError(f"ndarray of dtype {dtype}")
  return np.lib.format.dtype_to_descr(dtype)


def _array(np, value, budget):
  """An ndarray's dtype, shape and flat items (datetimes as integers of their unit; a structured
  array's records as tuples of their fields)."""
  kind = value.dtype.kind
  if kind in "Mm":
    items = [["int", int(x)] for x in value.view("int64").ravel().tolist()]
  elif kind in "biufcUSOV":
    items = [_encode(x, budget) for x in value.ravel().tolist()]
  else:
    raise TypeError(f"ndarray of dtype {value.dtype}")
  return ["ndarray", _dtype(np, value.dtype), list(value.shape), items]


_BUILTIN_TYPES = (bool, int, float, complex, str, bytes, list, tuple, set, frozenset, dict, object, type(None))
_ITERATOR_MODULES = ("builtins", "itertools", "collections", "solution")


def _is_iterator(kind) -> bool:
  """A generator, a builtin or itertools iterator, or an iterator class of the program's own."""
  return kind.__module__ in _ITERATOR_MODULES and hasattr(kind, "__next__") and hasattr(kind, "__iter__")


def _is_namedtuple(kind) -> bool:
  return (issubclass(kind, tuple) and kind.__bases__ == (tuple,) and isinstance(getattr(kind, "_fields", None), tuple)
          and all(getattr(kind, m) is getattr(tuple, m) for m in ("__eq__", "__ne__", "__len__", "__iter__")))


def _is_plain_instance(value, kind) -> bool:
  return (kind.__bases__ == (object,) and kind.__eq__ is object.__eq__ and kind.__ne__ is object.__ne__
          and type(getattr(value, "__dict__", None)) is dict and not hasattr(kind, "__slots__"))


def _index(pd, np, value, budget):
  kind = type(value)
  if kind is pd.RangeIndex:
    return ["range_index", value.start, value.stop, value.step, _encode(value.name, budget)]
  if kind is pd.MultiIndex:
    return ["multi_index", [_encode(n, budget) for n in value.names],
            [_encode(tuple(x), budget) for x in value.tolist()]]
  if kind in (pd.Index, pd.DatetimeIndex, pd.TimedeltaIndex, pd.CategoricalIndex):
    return ["index", str(value.dtype), _encode(value.name, budget), _array(np, value.to_numpy(), budget)]
  raise TypeError(f"index of type {kind.__name__}")


def _library_value(value, kind, budget):
  """A stdlib or bs4 document node as what its comparison reads, or None: an ElementTree Element
  (compared by identity in Python) as a RecordedObject of its tag, attributes, text, tail and children;
  a bs4 Tag (compared by name, attributes and contents) as one of its markup; a bs4 ResultSet as the
  list it is, a NavigableString as the str it is."""
  name = f"{kind.__module__}.{kind.__qualname__}"
  if name == "xml.etree.ElementTree.Element":
    fields = (("attrib", dict(value.attrib)), ("children", list(value)), ("tag", value.tag), ("tail", value.tail),
              ("text", value.text))
    return ["object", name, [[field, _encode(item, budget)] for field, item in fields]]
  if name == "bs4.element.Tag":
    return ["object", name, [["markup", _encode(str(value), budget)]]]
  if name == "bs4.element.ResultSet":
    return ["list", [_encode(x, budget) for x in list.__iter__(value)]]
  if name == "bs4.element.NavigableString":
    return ["str", str.__getitem__(value, slice(None))]
  return None


def _encode(value, budget):
  budget[0] -= 1
  if budget[0] < 0:
    raise _TooLarge
  kind = type(value)
  if value is None:
    return ["none"]
  if kind is bool:
    return ["bool", value]
  if kind is int:
    return ["int", value]
  if kind is float:
    return ["float", repr(value)]  # repr round-trips, nan and inf included
  if kind is complex:
    return ["complex", repr(value.real), repr(value.imag)]
  if kind is str:
    budget[0] -= len(value) // 16
    return ["str", value]
  if kind is bytes:
    return ["bytes", value.hex()]
  if kind in (list, tuple) and value and all(type(x) is int for x in value):
    budget[0] -= len(value)  # a list of ints as one JSON list: a fifth of the tagged form's size
    if budget[0] < 0:
      raise _TooLarge
    return ["ints", kind.__name__, list(value)]
  if kind in (list, tuple, set, frozenset):
    items = [_encode(x, budget) for x in value]
    if kind in (set, frozenset):
      items.sort(key=json.dumps)  # a set's order is not part of its value
    return [kind.__name__, items]
  if kind in (dict, collections.Counter, collections.OrderedDict, collections.defaultdict):
    return [kind.__name__, [[_encode(k, budget), _encode(v, budget)] for k, v in dict.items(value)]]
  if kind is decimal.Decimal:
    return ["Decimal", str(value)]
  if kind is fractions.Fraction:
    return ["Fraction", value.numerator, value.denominator]
  if kind in (datetime.date, datetime.datetime, datetime.time):
    return [kind.__name__, value.isoformat()]
  if kind is datetime.timedelta:
    return ["timedelta", value.days, value.seconds, value.microseconds]
  if kind is type and value in _BUILTIN_TYPES:  # `pd.Series({'A': int})`: a dtype told by its type
    return ["builtin_type", value.__name__]
  np = sys.modules.get("numpy")
  if np is not None:
    if kind is np.ndarray:
      return _array(np, value, budget)
    if kind is np.matrix:
      return ["matrix", _array(np, np.asarray(value), budget)]
    if kind in _numpy_scalar_types(np):
      return ["ndarray_item", _array(np, np.asarray(value).reshape(1), budget)]
    if isinstance(value, np.dtype) and kind.__module__ == "numpy.dtypes":
      return ["dtype", _dtype(np, value)]
  if _is_iterator(kind):
    items = []
    for item in value:  # as list(value) would draw them; an endless one runs out of budget
      items.append(_encode(item, budget))
    return ["iterator", items]
  if _is_namedtuple(kind):
    return ["tuple", [_encode(x, budget) for x in tuple.__iter__(value)]]
  if _is_plain_instance(value, kind):
    attributes = [[name, _encode(item, budget)] for name, item in sorted(dict.items(value.__dict__))
                  if type(name) is str]
    return ["object", f"{kind.__module__}.{kind.__qualname__}", attributes]
  library = _library_value(value, kind, budget)
  if library is not None:
    return library
  pd = sys.modules.get("pandas")
  if pd is not None and np is not None:
    if kind is pd.Series:
      return ["series", str(value.dtype), _encode(value.name, budget), _index(pd, np, value.index, budget),
              _array(np, value.to_numpy(), budget)]
    if kind is pd.DataFrame:
      columns = [[str(value.dtypes.iloc[i]), _array(np, value.iloc[:, i].to_numpy(), budget)]
                 for i in range(value.shape[1])]
      return ["frame", _index(pd, np, value.columns, budget), _index(pd, np, value.index, budget), columns]
    if kind in (pd.Index, pd.RangeIndex, pd.MultiIndex, pd.DatetimeIndex, pd.TimedeltaIndex,
                pd.CategoricalIndex):
      return _index(pd, np, value, budget)
    if value is pd.NaT:
      return ["nat"]
    if value is pd.NA:
      return ["na"]
    if kind is pd.Timestamp:
      return ["timestamp", value.value, str(value.tz) if value.tz else None]
    if kind is pd.Timedelta:
      return ["pd_timedelta", value.value]
    if kind is pd.Interval:
      return ["interval", _encode(value.left, budget), _encode(value.right, budget), value.closed]
  return ["unrecorded", f"not plain data: {kind.__module__}.{kind.__qualname__}"]


def encode(value) -> list:
  """`value` as JSON-able tagged lists; a value that is not plain data, or one past MAX_CHARS, as
  ["unrecorded", why]. Never raises (a self-containing list, a huge int: unrecorded)."""
  try:
    encoded = _encode(value, [MAX_CHARS])
    if len(json.dumps(encoded)) > MAX_CHARS:
      raise _TooLarge
    return encoded
  except _TooLarge:
    return ["unrecorded", f"{type(value).__name__} larger than {MAX_CHARS} characters encoded"]
  except BaseException as error:  # RecursionError, ValueError of int->str, a broken extension dtype
    return ["unrecorded", f"not plain data: {type(value).__name__} ({type(error).__name__})"]


# ---- outside the sandbox -------------------------------------------------------------------------

class UnrecordedValue(TypeError):
  """A check used a value that did not cross the wall; its message says why."""


class Unrecorded:
  """A value that did not cross the wall (not plain data, too large, or its expression raised): every
  use that could make a check pass raises instead, naming why."""
  __hash__ = None

  def __init__(self, why: str):
    self.why = why

  def __repr__(self):
    return f"<unrecorded: {self.why}>"

  def _refuse(self, *args, **kwargs):
    raise UnrecordedValue(self.why)

  __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _refuse
  __contains__ = __getitem__ = __abs__ = __neg__ = __pos__ = __float__ = __int__ = __index__ = _refuse
  __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
  __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __round__ = _refuse
  __array__ = _refuse  # numpy would otherwise wrap it in an object array and compare elementwise


class MalformedRecord(ValueError):
  """Data `encode` never writes: a forged or cut record."""


# What one decoded array may allocate: far above what MAX_CHARS of record can describe, far below
# what a forged dtype ("<U100000000" for each of 10,000 items) would take of the scorer's memory.
MAX_ARRAY_BYTES = 1 << 28
_ARRAY_KINDS = "biufcUSOMmV"  # the dtype kinds encode writes (_array)
# tag -> number of fields after it, for the tags whose fields are fixed
_ARITY = {"none": 0, "bool": 1, "int": 1, "str": 1, "float": 1, "complex": 2, "bytes": 1, "list": 1,
          "tuple": 1, "set": 1, "frozenset": 1, "dict": 1, "Counter": 1, "OrderedDict": 1,
          "defaultdict": 1, "Decimal": 1, "Fraction": 2, "date": 1, "datetime": 1, "time": 1,
          "timedelta": 3, "ndarray": 3, "ndarray_item": 1, "series": 4, "frame": 3, "index": 3,
          "range_index": 4, "multi_index": 2, "nat": 0, "na": 0, "timestamp": 2, "pd_timedelta": 1,
          "unrecorded": 1, "iterator": 1, "object": 2, "dtype": 1,
          "builtin_type": 1, "matrix": 1, "interval": 3, "ints": 2}
_FIELD_TYPES = {"bool": bool, "int": int, "str": str, "float": str, "complex": str, "bytes": str,
                "Decimal": str, "Fraction": int, "date": str, "datetime": str, "time": str,
                "timedelta": int, "pd_timedelta": int}


def _check(data) -> str:
  """`data`'s tag, once its shape is one `encode` writes; else MalformedRecord."""
  if type(data) is not list or not data or type(data[0]) is not str:
    raise MalformedRecord(f"not a tagged value: {_show(data)}")
  tag = data[0]
  if tag not in _ARITY:
    raise MalformedRecord(f"unknown value tag {tag[:40]!r}")
  if len(data) != 1 + _ARITY[tag]:
    raise MalformedRecord(f"{tag} with {len(data) - 1} fields")
  kind = _FIELD_TYPES.get(tag)
  if kind is not None and not all(type(field) is kind for field in data[1:]):
    raise MalformedRecord(f"{tag} with a field that is not {kind.__name__}")
  return tag


def _show(data) -> str:
  try:
    return repr(data)[:80] if type(data) is not list else f"a list of {len(data)}"
  except Exception:  # noqa: BLE001 - repr of an int over 4,300 digits raises
    return type(data).__name__


def _decode_dtype(text):
  import numpy as np

  if type(text) is str:
    return np.dtype(text)
  if type(text) is list:  # a structured dtype's descr
    return np.lib.format.descr_to_dtype([tuple(field) if type(field) is list else field for field in text])
  raise MalformedRecord(f"a dtype of {type(text).__name__}")


class RecordedObject:
  """An instance of a plain class, as its class's name and attributes (see the module's docstring)."""
  __slots__ = ("type_name", "attributes")

  def __init__(self, type_name: str, attributes: tuple):
    self.type_name, self.attributes = type_name, attributes

  def __eq__(self, other):
    if type(other) is not RecordedObject:
      return NotImplemented
    return self.type_name == other.type_name and self.attributes == other.attributes

  def __hash__(self):
    return hash((self.type_name, self.attributes))

  def __repr__(self):
    return f"<{self.type_name} {dict(self.attributes)!r}>"


def _decode_array(data):
  import numpy as np

  if _check(data) != "ndarray":
    raise MalformedRecord(f"{data[0]} where an ndarray belongs")
  _, dtype, shape, items = data
  dtype = _decode_dtype(dtype)
  if dtype.kind not in _ARRAY_KINDS or type(items) is not list or \
      dtype.itemsize * len(items) > MAX_ARRAY_BYTES:
    raise MalformedRecord(f"an ndarray of {len(items) if type(items) is list else '?'} x {dtype}")
  values = [decode(x) for x in items]
  if dtype.kind in "Mm":
    return np.array(values, dtype="int64").view(dtype).reshape(shape)
  if dtype.kind == "O":
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array.reshape(shape)
  return np.array(values, dtype=dtype).reshape(shape)


def _decode_index(data):
  import pandas as pd

  tag = _check(data)
  if tag == "range_index":
    return pd.RangeIndex(data[1], data[2], data[3], name=decode(data[4]))
  if tag == "multi_index":
    return pd.MultiIndex.from_tuples([decode(x) for x in data[2]], names=[decode(n) for n in data[1]])
  if tag != "index":
    raise MalformedRecord(f"{tag} where an index belongs")
  _, dtype, name, values = data
  return pd.Index(_decode_array(values), name=decode(name)).astype(dtype)


def decode(data):
  """The value `encode` described, rebuilt from plain data (an Unrecorded where it was not). Total:
  anything `encode` does not write (a forged record: another shape, a huge or deep value) raises
  MalformedRecord, never another exception."""
  try:
    return _decode(data)
  except MalformedRecord:
    raise
  except Exception as error:  # noqa: BLE001 - the one guard: TypeError, OverflowError, RecursionError...
    raise MalformedRecord(f"{type(error).__name__}: {str(error)[:120]}") from None


def _decode(data):
  tag = _check(data)
  if tag == "none":
    return None
  if tag in ("bool", "int", "str"):
    return data[1]
  if tag == "float":
    return float(data[1])
  if tag == "complex":
    return complex(float(data[1]), float(data[2]))
  if tag == "bytes":
    return bytes.fromhex(data[1])
  if tag in ("list", "tuple", "set", "frozenset"):
    return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](_decode(x) for x in data[1])
  if tag in ("dict", "Counter", "OrderedDict", "defaultdict"):
    pairs = [(_decode(k), _decode(v)) for k, v in data[1]]
    if tag == "defaultdict":
      return collections.defaultdict(None, pairs)  # its factory is code, not data
    return {"dict": dict, "Counter": collections.Counter, "OrderedDict": collections.OrderedDict}[tag](dict(pairs))
  if tag == "Decimal":
    return decimal.Decimal(data[1])
  if tag == "Fraction":
    return fractions.Fraction(data[1], data[2])
  if tag in ("date", "datetime", "time"):
    return getattr(datetime, tag).fromisoformat(data[1])
  if tag == "timedelta":
    return datetime.timedelta(days=data[1], seconds=data[2], microseconds=data[3])
  if tag == "ndarray":
    return _decode_array(data)
  if tag == "ndarray_item":
    return _decode_array(data[1])[0]
  if tag == "unrecorded":
    return Unrecorded(str(data[1])[:300])
  if tag == "ints":
    if data[1] not in ("list", "tuple") or type(data[2]) is not list or not all(type(x) is int for x in data[2]):
      raise MalformedRecord("ints that are not a list or tuple of integers")
    return list(data[2]) if data[1] == "list" else tuple(data[2])
  if tag == "iterator":
    return iter([_decode(x) for x in data[1]])
  if tag == "object":
    if type(data[1]) is not str or type(data[2]) is not list or \
        not all(type(a) is list and len(a) == 2 and type(a[0]) is str for a in data[2]):
      raise MalformedRecord("an object that is not [type name, [[attribute, value], ...]]")
    return RecordedObject(data[1], tuple((name, _decode(value)) for name, value in data[2]))
  if tag == "dtype":
    return _decode_dtype(data[1])
  if tag == "builtin_type":
    found = [t for t in _BUILTIN_TYPES if t.__name__ == data[1]]
    if not found:
      raise MalformedRecord(f"a builtin type named {str(data[1])[:40]!r}")
    return found[0]
  if tag == "matrix":
    import numpy as np
    return np.asmatrix(_decode_array(data[1]))
  return _decode_pandas(tag, data)


def _decode_pandas(tag: str, data):
  import pandas as pd

  if tag == "series":
    return pd.Series(_decode_array(data[4]), index=_decode_index(data[3]), name=_decode(data[2])).astype(data[1])
  if tag == "frame":
    columns = _decode_index(data[1])
    frame = pd.DataFrame({i: pd.Series(_decode_array(array), dtype=None).astype(dtype)
                          for i, (dtype, array) in enumerate(data[3])})
    frame.index = _decode_index(data[2])
    frame.columns = columns
    return frame
  if tag == "nat":
    return pd.NaT
  if tag == "na":
    return pd.NA
  if tag == "timestamp":
    return pd.Timestamp(data[1], tz="UTC").tz_convert(data[2]) if data[2] else pd.Timestamp(data[1])
  if tag == "pd_timedelta":
    return pd.Timedelta(data[1])
  if tag == "interval":
    if data[3] not in ("left", "right", "both", "neither"):
      raise MalformedRecord(f"an interval closed on {str(data[3])[:20]!r}")
    return pd.Interval(_decode(data[1]), _decode(data[2]), closed=data[3])
  return _decode_index(data)


def dumps(value) -> str:
  return json.dumps(encode(value), allow_nan=False)


def loads(text: str):
  """decode(json.loads(text)); malformed text (a forged or cut record) is an Unrecorded."""
  try:
    return decode(json.loads(text))
  except Exception as error:  # noqa: BLE001 - not JSON, too deep (RecursionError), MalformedRecord
    return Unrecorded(f"malformed record ({type(error).__name__})")

