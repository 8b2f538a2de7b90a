/* Log tests: the journal fields of a line about a domain, caught by a log
 * writer in place of the journal's. */
#include "kstaled-log.h"

typedef struct {
  GHashTable *fields;           /* of the last line: name -> value */
  GLogLevelFlags level;
} Caught;

static GLogWriterOutput
catch_fields (GLogLevelFlags level, const GLogField *fields, gsize n,
              gpointer data)
{
  Caught *caught = data;

  g_hash_table_remove_all (caught->fields);
  caught->level = level;
  for (gsize i = 0; i < n; i++)
    g_hash_table_insert (caught->fields, g_strdup (fields[i].key),
                         fields[i].length < 0
                         ? g_strdup (fields[i].value)
                         : g_strndup (fields[i].value, fields[i].length));
  return G_LOG_WRITER_HANDLED;
}

static Caught caught;

static const char *
field (const char *name)
{
  return g_hash_table_lookup (caught.fields, name);
}

static void
test_balloon_change (void)
{
  kstaled_log_domain (G_LOG_LEVEL_MESSAGE, "web1", "inflate", "shrink",
                      "domain=%s action=%s", "web1", "inflate");
  g_assert_cmpint (caught.level, ==, G_LOG_LEVEL_MESSAGE);
  g_assert_cmpstr (field ("MESSAGE"), ==, "domain=web1 action=inflate");
  g_assert_cmpstr (field ("KSTALED_DOMAIN"), ==, "web1");
  g_assert_cmpstr (field ("KSTALED_ACTION"), ==, "inflate");
  g_assert_cmpstr (field ("KSTALED_REASON"), ==, "shrink");
  g_assert_cmpstr (field ("MESSAGE_ID"), ==, KSTALED_BALLOON_CHANGE_MESSAGE_ID);
  g_assert_cmpstr (field ("PRIORITY"), ==, "5");
  g_assert_cmpstr (field ("GLIB_DOMAIN"), ==, "kstaled-agent");
}

static void
test_no_change (void)
{
  kstaled_log_domain (G_LOG_LEVEL_DEBUG, "web1", "none", "hysteresis", "x");
  g_assert_cmpstr (field ("KSTALED_ACTION"), ==, "none");
  g_assert_null (field ("MESSAGE_ID"));
  g_assert_cmpstr (field ("PRIORITY"), ==, "7");
  kstaled_log_domain (G_LOG_LEVEL_WARNING, "db1", NULL, "unresponsive",
                      "domain=%s is unresponsive", "db1");
  g_assert_cmpstr (field ("KSTALED_DOMAIN"), ==, "db1");
  g_assert_null (field ("KSTALED_ACTION"));
  g_assert_cmpstr (field ("KSTALED_REASON"), ==, "unresponsive");
  g_assert_cmpstr (field ("PRIORITY"), ==, "4");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  caught.fields = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         g_free);
  g_log_set_writer_func (catch_fields, &caught, NULL);
  g_test_add_func ("/log/balloon-change", test_balloon_change);
  g_test_add_func ("/log/no-change", test_no_change);
  return g_test_run ();
}
