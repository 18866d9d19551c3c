"""PHP: a PHPDoc block and a signature with PHP's native types, run by the php CLI.

Types: list, set, map and tuple are all PHP arrays (a map's keys are ints or strings; PHP itself
turns a numeric string key into an int, which the harness turns back for string-keyed maps), optional
is `?T` / null. The file is in PHP's default coercive typing mode (no strict_types): an int returned
through a `float` return type becomes a float, a float with no fraction through `int` an int, as
PHP programmers expect. The harness reads a list, set or tuple as the array's values in order
(so `array_filter`'s gappy keys do not matter), and an integral float where an int is expected.

Whole programs (BabelCode's solutions): `<?php`, the code, the harness; a set is passed and read back
as BabelCode's PHP writes one, an array from each member to true (`FROM_DECLARED`).
"""

from __future__ import annotations

import math
import os

from sandbox.renderers import base, literals
from sandbox.typed import INT64, Question, Type, default_value

# /usr/bin/php is a link through /etc/alternatives, which the sandbox does not show.
PHP = os.path.realpath("/usr/bin/php")
# `-n`: no php.ini, so results do not depend on the host's configuration (and the sandbox need
# not see /etc/php); the few shared extensions a solution may use are loaded by name instead.
PHP_FLAGS = ("-n", "-d", "extension=ctype", "-d", "extension=iconv", "-d", "extension=calendar",
             "-d", "display_errors=stderr", "-d", "log_errors=0", "-d", "error_reporting=E_ALL",
             "-d", "serialize_precision=-1", "-d", "precision=14", "-d", "memory_limit=1024M")

# Keywords and reserved type names: no function may be named after them.
KEYWORDS = frozenset("""
  __halt_compiler abstract and array as break callable case catch class clone const continue
  declare default die do echo else elseif empty enddeclare endfor endforeach endif endswitch
  endwhile enum eval exit extends final finally fn for foreach function global goto if implements
  include include_once instanceof insteadof interface isset list match namespace new or print
  private protected public readonly require require_once return static switch throw trait try unset
  use var while xor yield int float bool string true false null void iterable object mixed never
  self parent
""".split())

# Functions of PHP's always-present extensions (Core, standard, date, pcre, ctype, json, random,
# hash, SPL; PHP 8.2): declaring a function of the same name is a fatal "Cannot redeclare"
# (HumanEval/23 is `strlen`), so such an entry function is renamed.
BUILTIN_FUNCTIONS = frozenset("""
  abs acos acosh addcslashes addslashes array_change_key_case array_chunk array_column array_combine
  array_count_values array_diff array_diff_assoc array_diff_key array_diff_uassoc array_diff_ukey
  array_fill array_fill_keys array_filter array_flip array_intersect array_intersect_assoc
  array_intersect_key array_intersect_uassoc array_intersect_ukey array_is_list array_key_exists
  array_key_first array_key_last array_keys array_map array_merge array_merge_recursive
  array_multisort array_pad array_pop array_product array_push array_rand array_reduce array_replace
  array_replace_recursive array_reverse array_search array_shift array_slice array_splice array_sum
  array_udiff array_udiff_assoc array_udiff_uassoc array_uintersect array_uintersect_assoc
  array_uintersect_uassoc array_unique array_unshift array_values array_walk array_walk_recursive
  arsort asin asinh asort assert assert_options atan atan2 atanh base64_decode base64_encode
  base_convert basename bin2hex bindec boolval call_user_func call_user_func_array ceil chdir
  checkdate checkdnsrr chgrp chmod chop chown chr chroot chunk_split class_alias class_exists
  class_implements class_parents class_uses clearstatcache cli_get_process_title
  cli_set_process_title closedir closelog compact connection_aborted connection_status constant
  convert_uudecode convert_uuencode copy cos cosh count count_chars crc32 crypt ctype_alnum
  ctype_alpha ctype_cntrl ctype_digit ctype_graph ctype_lower ctype_print ctype_punct ctype_space
  ctype_upper ctype_xdigit current date date_add date_create date_create_from_format
  date_create_immutable date_create_immutable_from_format date_date_set date_default_timezone_get
  date_default_timezone_set date_diff date_format date_get_last_errors
  date_interval_create_from_date_string date_interval_format date_isodate_set date_modify
  date_offset_get date_parse date_parse_from_format date_sub date_sun_info date_sunrise date_sunset
  date_time_set date_timestamp_get date_timestamp_set date_timezone_get date_timezone_set
  debug_backtrace debug_print_backtrace debug_zval_dump decbin dechex decoct define defined deg2rad
  dir dirname disk_free_space disk_total_space diskfreespace dl dns_check_record dns_get_mx
  dns_get_record doubleval end enum_exists error_clear_last error_get_last error_log error_reporting
  escapeshellarg escapeshellcmd exec exp explode expm1 extension_loaded extract fclose fdatasync
  fdiv feof fflush fgetc fgetcsv fgets file file_exists file_get_contents file_put_contents
  fileatime filectime filegroup fileinode filemtime fileowner fileperms filesize filetype floatval
  flock floor flush fmod fnmatch fopen forward_static_call forward_static_call_array fpassthru
  fprintf fputcsv fputs fread fscanf fseek fsockopen fstat fsync ftell ftok ftruncate func_get_arg
  func_get_args func_num_args function_exists fwrite gc_collect_cycles gc_disable gc_enable
  gc_enabled gc_mem_caches gc_status get_browser get_called_class get_cfg_var get_class
  get_class_methods get_class_vars get_current_user get_debug_type get_declared_classes
  get_declared_interfaces get_declared_traits get_defined_constants get_defined_functions
  get_defined_vars get_extension_funcs get_headers get_html_translation_table get_include_path
  get_included_files get_loaded_extensions get_mangled_object_vars get_meta_tags get_object_vars
  get_parent_class get_required_files get_resource_id get_resource_type get_resources getcwd getdate
  getenv gethostbyaddr gethostbyname gethostbynamel gethostname getimagesize getimagesizefromstring
  getlastmod getmxrr getmygid getmyinode getmypid getmyuid getopt getprotobyname getprotobynumber
  getrandmax getrusage getservbyname getservbyport gettimeofday gettype glob gmdate gmmktime
  gmstrftime hash hash_algos hash_copy hash_equals hash_file hash_final hash_hkdf hash_hmac
  hash_hmac_algos hash_hmac_file hash_init hash_pbkdf2 hash_update hash_update_file
  hash_update_stream header header_register_callback header_remove headers_list headers_sent hebrev
  hex2bin hexdec highlight_file highlight_string hrtime html_entity_decode htmlentities
  htmlspecialchars htmlspecialchars_decode http_build_query http_response_code hypot idate
  ignore_user_abort image_type_to_extension image_type_to_mime_type implode in_array inet_ntop
  inet_pton ini_alter ini_get ini_get_all ini_parse_quantity ini_restore ini_set intdiv
  interface_exists intval ip2long iptcembed iptcparse is_a is_array is_bool is_callable is_countable
  is_dir is_double is_executable is_file is_finite is_float is_infinite is_int is_integer
  is_iterable is_link is_long is_nan is_null is_numeric is_object is_readable is_resource is_scalar
  is_string is_subclass_of is_uploaded_file is_writable is_writeable iterator_apply iterator_count
  iterator_to_array join json_decode json_encode json_last_error json_last_error_msg key key_exists
  krsort ksort lcfirst lcg_value lchgrp lchown levenshtein link linkinfo localeconv localtime log
  log10 log1p long2ip lstat ltrim mail max md5 md5_file memory_get_peak_usage memory_get_usage
  memory_reset_peak_usage metaphone method_exists mhash mhash_count mhash_get_block_size
  mhash_get_hash_name mhash_keygen_s2k microtime min mkdir mktime move_uploaded_file mt_getrandmax
  mt_rand mt_srand natcasesort natsort net_get_interfaces next nl2br nl_langinfo number_format
  ob_clean ob_end_clean ob_end_flush ob_flush ob_get_clean ob_get_contents ob_get_flush
  ob_get_length ob_get_level ob_get_status ob_implicit_flush ob_list_handlers ob_start octdec
  opendir openlog ord output_add_rewrite_var output_reset_rewrite_vars pack parse_ini_file
  parse_ini_string parse_str parse_url passthru password_algos password_get_info password_hash
  password_needs_rehash password_verify pathinfo pclose pfsockopen php_ini_loaded_file
  php_ini_scanned_files php_sapi_name php_strip_whitespace php_uname phpcredits phpinfo phpversion
  pi popen pos pow preg_filter preg_grep preg_last_error preg_last_error_msg preg_match
  preg_match_all preg_quote preg_replace preg_replace_callback preg_replace_callback_array
  preg_split prev print_r printf proc_close proc_get_status proc_nice proc_open proc_terminate
  property_exists putenv quoted_printable_decode quoted_printable_encode quotemeta rad2deg rand
  random_bytes random_int range rawurldecode rawurlencode readdir readfile readlink realpath
  realpath_cache_get realpath_cache_size register_shutdown_function register_tick_function rename
  reset restore_error_handler restore_exception_handler rewind rewinddir rmdir round rsort rtrim
  scandir serialize set_error_handler set_exception_handler set_file_buffer set_include_path
  set_time_limit setcookie setlocale setrawcookie settype sha1 sha1_file shell_exec show_source
  shuffle similar_text sin sinh sizeof sleep socket_get_status socket_set_blocking
  socket_set_timeout sort soundex spl_autoload spl_autoload_call spl_autoload_extensions
  spl_autoload_functions spl_autoload_register spl_autoload_unregister spl_classes spl_object_hash
  spl_object_id sprintf sqrt srand sscanf stat str_contains str_ends_with str_getcsv str_ireplace
  str_pad str_repeat str_replace str_rot13 str_shuffle str_split str_starts_with str_word_count
  strcasecmp strchr strcmp strcoll strcspn stream_bucket_append stream_bucket_make_writeable
  stream_bucket_new stream_bucket_prepend stream_context_create stream_context_get_default
  stream_context_get_options stream_context_get_params stream_context_set_default
  stream_context_set_option stream_context_set_params stream_copy_to_stream stream_filter_append
  stream_filter_prepend stream_filter_register stream_filter_remove stream_get_contents
  stream_get_filters stream_get_line stream_get_meta_data stream_get_transports stream_get_wrappers
  stream_is_local stream_isatty stream_register_wrapper stream_resolve_include_path stream_select
  stream_set_blocking stream_set_chunk_size stream_set_read_buffer stream_set_timeout
  stream_set_write_buffer stream_socket_accept stream_socket_client stream_socket_enable_crypto
  stream_socket_get_name stream_socket_pair stream_socket_recvfrom stream_socket_sendto
  stream_socket_server stream_socket_shutdown stream_supports_lock stream_wrapper_register
  stream_wrapper_restore stream_wrapper_unregister strftime strip_tags stripcslashes stripos
  stripslashes stristr strlen strnatcasecmp strnatcmp strncasecmp strncmp strpbrk strpos strptime
  strrchr strrev strripos strrpos strspn strstr strtok strtolower strtotime strtoupper strtr strval
  substr substr_compare substr_count substr_replace symlink sys_get_temp_dir sys_getloadavg syslog
  system tan tanh tempnam time time_nanosleep time_sleep_until timezone_abbreviations_list
  timezone_identifiers_list timezone_location_get timezone_name_from_abbr timezone_name_get
  timezone_offset_get timezone_open timezone_transitions_get timezone_version_get tmpfile touch
  trait_exists trigger_error trim uasort ucfirst ucwords uksort umask uniqid unlink unpack
  unregister_tick_function unserialize urldecode urlencode user_error usleep usort utf8_decode
  utf8_encode var_dump var_export version_compare vfprintf vprintf vsprintf wordwrap zend_version
""".split())

RESERVED = KEYWORDS | BUILTIN_FUNCTIONS

_NATIVE = {"bool": "bool", "int": "int", "float": "float", "string": "string"}


def native_type(t: Type) -> str:
  """The type declaration PHP checks: a scalar, `array`, or `?T`."""
  if t.name == "optional":
    inner = native_type(t.element)
    return inner if inner.startswith("?") else "?" + inner
  return _NATIVE.get(t.name, "array")


def doc_type(t: Type) -> str:
  """The PHPDoc (PHPStan/Psalm) type: `float[]`, `array<string, int>`, `array{int, int}`."""
  if t.name in _NATIVE:
    return _NATIVE[t.name]
  if t.name in ("list", "set"):
    inner = doc_type(t.element)
    return f"({inner})[]" if t.element.name == "optional" else f"{inner}[]"
  if t.name == "map":
    return f"array<{doc_type(t.args[0])}, {doc_type(t.args[1])}>"
  if t.name == "tuple":
    return "array{" + ", ".join(doc_type(a) for a in t.args) + "}"
  if t.name == "optional":
    return f"{doc_type(t.element)}|null"
  raise AssertionError(t)


def string_literal(value: str) -> str:
  """A single-quoted PHP string: only \\ and ' are escapes there; `$` and newlines are literal."""
  return "'" + literals.escape(value, chr, specials="\\'") + "'"


def literal(t: Type, value, sets_as_keys: bool = False) -> str:
  """A PHP expression for `value` of type `t`; with `sets_as_keys`, a set is BabelCode's PHP set, an
  array from each member to true."""
  if value is None:
    return "null"
  if t.name == "bool":
    return "true" if value else "false"
  if t.name == "int":
    # -9223372036854775808 would parse as -(9223372036854775808), a float.
    return "(-9223372036854775807 - 1)" if value == INT64[0] else str(value)
  if t.name == "float":
    if math.isnan(value):
      return "NAN"
    if math.isinf(value):
      return "INF" if value > 0 else "-INF"
    return repr(float(value))
  if t.name == "string":
    return string_literal(value)
  if t.name == "optional":
    return literal(t.element, value, sets_as_keys)
  if t.name == "list":
    return "[" + ", ".join(literal(t.element, v, sets_as_keys) for v in value) + "]"
  if t.name == "set":
    members = [literal(t.element, v) for v in sorted(value)]
    return "[" + ", ".join(f"{m} => true" if sets_as_keys else m for m in members) + "]"
  if t.name == "tuple":
    return "[" + ", ".join(literal(a, v, sets_as_keys) for a, v in zip(t.args, value)) + "]"
  if t.name == "map":
    return "[" + ", ".join(f"{literal(t.args[0], k)} => {literal(t.args[1], v, sets_as_keys)}"
                           for k, v in value.items()) + "]"
  raise AssertionError(t)


def type_tree(t: Type) -> str:
  """The type as nested arrays the harness walks: ['list', [['int', []]]]."""
  return "[" + string_literal(t.name) + ", [" + ", ".join(type_tree(a) for a in t.args) + "]]"


# Each record starts on a fresh line ("\n" first): a completion that echoes text without a newline
# would otherwise swallow the record into its own line. Strings are JSON-encoded with every
# non-ASCII character escaped (the scorer splits lines with str.splitlines, which also breaks at
# U+2028 and friends); invalid UTF-8 becomes U+FFFD.
HARNESS = r"""

function __codelm_fail(string $name, $v): void {
  throw new TypeError('expected ' . $name . ', got ' . get_debug_type($v));
}

function __codelm_encode(array $t, $v): string {
  [$name, $args] = $t;
  switch ($name) {
    case 'optional':
      return $v === null ? 'null' : __codelm_encode($args[0], $v);
    case 'bool':
      if (!is_bool($v)) __codelm_fail($name, $v);
      return $v ? 'true' : 'false';
    case 'int':
      if (is_int($v)) return (string)$v;
      // An integral float (floor(), pow() and overflow give floats) within the int64 range.
      if (is_float($v) && is_finite($v) && floor($v) == $v && abs($v) < 9.2233720368547758e18) {
        return sprintf('%.0f', $v);
      }
      __codelm_fail($name, $v);
    case 'float':
      if (is_int($v)) return (string)$v;
      if (!is_float($v)) __codelm_fail($name, $v);
      if (is_nan($v)) return 'NaN';
      if (is_infinite($v)) return $v > 0 ? 'Infinity' : '-Infinity';
      return json_encode($v);  // shortest round-trip text (serialize_precision -1)
    case 'string':
      if (!is_string($v)) __codelm_fail($name, $v);
      return json_encode($v, JSON_INVALID_UTF8_SUBSTITUTE);
  }
  if (!is_array($v)) __codelm_fail($name, $v);
  $parts = [];
  if ($name === 'map') {
    foreach ($v as $k => $x) {
      // PHP stores the key '1' as the int 1: a string-keyed map gets its string back.
      $key = $args[0][0] === 'string' && is_int($k) ? (string)$k : $k;
      $parts[] = '[' . __codelm_encode($args[0], $key) . ', ' . __codelm_encode($args[1], $x) . ']';
    }
  } else {
    $values = array_values($v);
    if ($name === 'tuple' && count($values) !== count($args)) {
      throw new TypeError('expected a tuple of ' . count($args) . ', got ' . count($values) . ' items');
    }
    foreach ($values as $i => $x) {
      $parts[] = __codelm_encode($name === 'tuple' ? $args[$i] : $args[0], $x);
    }
  }
  return '[' . implode(', ', $parts) . ']';
}

function __codelm_message(Throwable $e): string {
  $text = get_class($e) . ': ' . $e->getMessage();
  $text = str_replace(["\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"], ' ', $text);
  return substr(preg_replace('/[\x00-\x1f\x7f]/', ' ', $text) ?? 'unprintable message', 0, 300);
}

function __codelm_main(string $prefix, array $return_type, array $cases): void {
  foreach ($cases as [$idx, $call]) {
    try {
      $line = 'ok ' . __codelm_encode($return_type, $call());
    } catch (Throwable $e) {
      $line = 'exception ' . __codelm_message($e);
    }
    fwrite(STDOUT, "\n" . $prefix . $idx . ' ' . $line . "\n");
    fflush(STDOUT);
  }
}

"""


# A whole program's returned value into the harness's shapes: a set as BabelCode's PHP returns it
# (its test compares serialize() texts with an array from each member to true) becomes its members;
# a set whose values are not all true is refused.
FROM_DECLARED = r'''
function __codelm_from_declared(array $t, $v) {
  [$name, $args] = $t;
  if ($v === null || !is_array($v)) return $v;
  if ($name === 'optional') return __codelm_from_declared($args[0], $v);
  $out = [];
  if ($name === 'set') {
    foreach ($v as $member => $flag) {
      if ($flag !== true) throw new TypeError('expected a set as an array from each member to true');
      $out[] = $args[0][0] === 'string' && is_int($member) ? (string)$member : $member;
    }
    return $out;
  }
  foreach ($v as $k => $x) {
    $out[$k] = __codelm_from_declared($name === 'tuple' ? ($args[$k] ?? $args[0]) : $args[$name === 'map' ? 1 : 0], $x);
  }
  return $out;
}
'''

class Php(base.Renderer):
  name = "php"
  display_name = "PHP"
  value_literal = staticmethod(literal)
  toolchain = base.Toolchain(binaries=(PHP,), version_command=(PHP, "--version"))
  convention = "camel"

  def function_name(self, question: Question) -> str:
    return base.safe_name(base.snake_case(question.entry_fn_name), RESERVED)

  def params(self, question: Question) -> list[str]:
    return base.param_names(question, base.snake_case, frozenset({"this"}))

  def signature_with_docstring(self, question: Question) -> str:
    names = self.params(question)
    lines = [line.replace("*/", "*\\/") for line in base.doc_lines(question.description)]
    lines += [f"@param {doc_type(p.type)} ${n}" for n, p in zip(names, question.params)]
    lines.append(f"@return {doc_type(question.return_type)}")
    doc = "/**\n" + "".join((" * " + line).rstrip() + "\n" for line in lines) + " */\n"
    params = ", ".join(f"{native_type(p.type)} ${n}" for n, p in zip(names, question.params))
    return (f"<?php\n\n{doc}function {self.function_name(question)}({params}): "
            f"{native_type(question.return_type)} {{\n")

  def stub(self, question: Question) -> str:
    value = default_value(question.return_type)
    return f"  return {literal(question.return_type, value)};\n}}\n"

  def program(self, question: Question, completion: str) -> base.Program:
    name = self.function_name(question)
    cases = ",\n".join(f"  [{idx}, fn() => {name}({args})]" for idx, args in base.render_cases(question, literal))
    return self._program(question, self.signature_with_docstring(question) + completion, cases)

  def whole_program(self, question: Question, code: str) -> base.Program:
    """BabelCode's head (`<?php`), the code, the harness; a set goes in and comes back as BabelCode's
    PHP writes one, an array from each member to true (FROM_DECLARED reads it)."""
    tree = type_tree(question.return_type)
    cases = ",\n".join(f"  [{idx}, fn() => __codelm_from_declared({tree}, {self.entry_name(question)}({args}))]"
                       for idx, args in base.render_cases(question, lambda t, v: literal(t, v, sets_as_keys=True)))
    return self._program(question, "<?php\n" + code, cases, FROM_DECLARED)

  def _program(self, question: Question, source: str, cases: str, harness: str = "") -> base.Program:
    """`source`, then the harness that runs `cases` (the test cases' closures)."""
    text = (source + "\n" + HARNESS + harness +
            f"__codelm_main({string_literal(base.RECORD_PREFIX)}, "
            f"{type_tree(question.return_type)}, [\n{cases},\n]);\n")
    # `php -l` first, so that a syntax error is reported as a compile error, not as a run without
    # records. Warnings go to stderr, not between the records; floats print in their shortest form.
    return base.Program(files={"main.php": text}, compile=((PHP, "-n", "-l", "main.php"),),
                        run=(PHP, *PHP_FLAGS, "main.php"))

  def foreign(self, text: str) -> base.Foreign:
    """eval_php: `php f.php` (with codelm's ini flags)."""
    return base.Foreign("main.php", (PHP, *PHP_FLAGS, "main.php"), "php")


RENDERER = Php()
