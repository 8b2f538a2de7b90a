#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-domain.h"

#include <json-c/json.h>
#include <string.h>

#include "kstaled-autocleanups.h"

#define KSTALED_DRIVER_PREFIX "virtio-kstaled-"
/* A -device value in JSON is a flat object. */
#define DEVICE_JSON_DEPTH 2

/* The driver of a -device value in QEMU's key=value syntax: the first item
 * without "=", or the value of "driver=".  ",," is an escaped comma. */
static gchar *
keyval_driver (const char *option)
{
  g_autoptr (GString) item = g_string_new (NULL);
  gboolean first = TRUE;

  for (const char *p = option;; p++)
    {
      if (*p == ',' && p[1] == ',')
        {
          g_string_append_c (item, ',');
          p++;
          continue;
        }
      if (*p != ',' && *p != '\0')
        {
          g_string_append_c (item, *p);
          continue;
        }
      if (first && strchr (item->str, '=') == NULL)
        return g_string_free (g_steal_pointer (&item), FALSE);
      if (g_str_has_prefix (item->str, "driver="))
        return g_strdup (item->str + strlen ("driver="));
      if (*p == '\0')
        return NULL;
      first = FALSE;
      g_string_truncate (item, 0);
    }
}

static gchar *
json_driver (const char *option)
{
  g_autoptr (json_tokener) tok = json_tokener_new_ex (DEVICE_JSON_DEPTH);
  g_autoptr (json_object) obj = NULL;
  json_object *driver;

  if (tok == NULL)
    return NULL;
  obj = json_tokener_parse_ex (tok, option, (int) strlen (option));
  if (obj == NULL || !json_object_is_type (obj, json_type_object) ||
      !json_object_object_get_ex (obj, "driver", &driver) ||
      !json_object_is_type (driver, json_type_string))
    return NULL;
  return g_strdup (json_object_get_string (driver));
}

gboolean
kstaled_device_option_is_kstaled (const char *option)
{
  g_autofree gchar *driver = option[0] == '{' ? json_driver (option)
                                              : keyval_driver (option);

  return driver != NULL && g_str_has_prefix (driver, KSTALED_DRIVER_PREFIX);
}

typedef struct {
  KstaledDomainXml *info;
  gboolean device_option_next;  /* the last qemu:arg was -device */
} XmlParse;

static const char *
attribute (const char **names, const char **values, const char *name)
{
  for (guint i = 0; names[i] != NULL; i++)
    if (strcmp (names[i], name) == 0)
      return values[i];
  return NULL;
}

/* Whether @element, with its attributes, is the opt-in element: libvirt
 * prints each <metadata> child with its namespace declared on itself. */
static gboolean
is_metadata_opt_in (const char *element, const char **names,
                    const char **values)
{
  const char *colon = strchr (element, ':');
  g_autofree gchar *xmlns = NULL;

  if (colon == NULL)
    xmlns = g_strdup ("xmlns");
  else
    xmlns = g_strdup_printf ("xmlns:%.*s", (int) (colon - element), element);
  return g_strcmp0 (colon ? colon + 1 : element, KSTALED_METADATA_DEVICE) == 0 &&
         g_strcmp0 (attribute (names, values, xmlns), KSTALED_METADATA_NS) == 0;
}

static void
xml_start_element (GMarkupParseContext *context, const char *element,
                   const char **names, const char **values, gpointer data,
                   GError **error)
{
  XmlParse *parse = data;
  const GSList *stack = g_markup_parse_context_get_element_stack (context);
  guint depth = g_slist_length ((GSList *) stack);
  const char *parent = depth >= 2 ? stack->next->data : NULL;
  const char *value;

  (void) error;
  if (depth == 3 && strcmp (element, "memballoon") == 0 &&
      strcmp (parent, "devices") == 0)
    parse->info->deflate_on_oom =
      g_strcmp0 (attribute (names, values, "autodeflate"), "on") == 0;
  else if (depth == 3 && strcmp (parent, "metadata") == 0 &&
           is_metadata_opt_in (element, names, values))
    parse->info->has_device = TRUE;
  else if (depth == 3 && strcmp (element, "qemu:arg") == 0 &&
           strcmp (parent, "qemu:commandline") == 0 &&
           (value = attribute (names, values, "value")) != NULL)
    {
      if (parse->device_option_next && kstaled_device_option_is_kstaled (value))
        parse->info->has_device = TRUE;
      parse->device_option_next = strcmp (value, "-device") == 0 ||
                                  strcmp (value, "--device") == 0;
    }
}

gboolean
kstaled_domain_xml_parse (const char *xml, gssize len, KstaledDomainXml *info,
                          GError **error)
{
  static const GMarkupParser parser = { .start_element = xml_start_element };
  XmlParse parse = { .info = info };
  g_autoptr (GMarkupParseContext) context = NULL;

  *info = (KstaledDomainXml) { 0 };
  context = g_markup_parse_context_new (&parser, G_MARKUP_PREFIX_ERROR_POSITION,
                                        &parse, NULL);
  if (!g_markup_parse_context_parse (context, xml, len, error) ||
      !g_markup_parse_context_end_parse (context, error))
    {
      *info = (KstaledDomainXml) { 0 };
      return FALSE;
    }
  return TRUE;
}

void
kstaled_domain_stats_from_params (virTypedParameterPtr params, int nparams,
                                  KstaledDomainStats *stats)
{
  static const struct {
    const char *name;
    gsize has_offset, value_offset;
  } balloon_fields[] = {
#define FIELD(name, member) \
    { "balloon." name, G_STRUCT_OFFSET (KstaledBalloonStats, has_##member), \
      G_STRUCT_OFFSET (KstaledBalloonStats, member) }
    FIELD ("current", actual),
    FIELD ("available", available),
    FIELD ("usable", usable),
    FIELD ("unused", unused),
    FIELD ("swap_in", swap_in),
    FIELD ("major_fault", major_fault),
    FIELD ("rss", rss),
#undef FIELD
  };
  unsigned long long value;

  *stats = (KstaledDomainStats) { 0 };
  stats->has_state =
    virTypedParamsGetInt (params, nparams, "state.state", &stats->state) == 1;
  if (virTypedParamsGetInt (params, nparams, "state.reason",
                            &stats->reason) != 1)
    stats->reason = 0;
  if (virTypedParamsGetULLong (params, nparams, "balloon.maximum",
                               &value) == 1)
    stats->max_memory_kib = value;
  for (guint i = 0; i < G_N_ELEMENTS (balloon_fields); i++)
    if (virTypedParamsGetULLong (params, nparams, balloon_fields[i].name,
                                 &value) == 1)
      {
        G_STRUCT_MEMBER (gboolean, &stats->balloon,
                         balloon_fields[i].has_offset) = TRUE;
        G_STRUCT_MEMBER (guint64, &stats->balloon,
                         balloon_fields[i].value_offset) = value;
      }
}

void
kstaled_balloon_stats_exclude_balloon (KstaledBalloonStats *stats,
                                       guint64 max_memory_kib)
{
  guint64 balloon;

  if (!stats->has_actual || !stats->has_available ||
      stats->actual >= max_memory_kib)
    return;
  balloon = max_memory_kib - stats->actual;
  stats->available = stats->available > balloon ? stats->available - balloon
                                                : 0;
}
