#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-metrics.h"

#include <gio/gio.h>
#include <string.h>

struct _KstaledMetricsServer {
  GSocketService *service;
  guint16 port;
  gchar *url;
  gchar *token;                 /* NULL: none needed */
  KstaledMetricsFunc func;
  gpointer user_data;
  GQueue clients;
  GMainContext *context;        /* where the clients' I/O completes */
};

typedef struct {
  KstaledMetricsServer *server;
  GSocketConnection *conn;
  GCancellable *cancellable;    /* cancelled at the deadline or on free */
  GSource *deadline;
  GList link;                   /* in server->clients */
  gchar request[KSTALED_METRICS_MAX_REQUEST_LEN];
  gsize len;
  GBytes *response;
} Client;

/* @extra_headers: complete header lines; @with_body FALSE for HEAD, which
 * gets the headers GET would get. */
static GBytes *
response_full (const char *status, const char *extra_headers,
               const char *content_type, const char *body,
               gboolean with_body)
{
  gchar *text = g_strdup_printf ("HTTP/1.1 %s\r\n%s"
                                 "Content-Type: %s\r\n"
                                 "Content-Length: %" G_GSIZE_FORMAT "\r\n"
                                 "Connection: close\r\n\r\n%s",
                                 status, extra_headers, content_type,
                                 strlen (body), with_body ? body : "");

  return g_bytes_new_take (text, strlen (text));
}

static GBytes *
response (const char *status, const char *body)
{
  return response_full (status, "", "text/plain", body, TRUE);
}

/* Whether a header line of @request is "Authorization: Bearer @token",
 * comparing the token in a time that does not depend on where it differs. */
static gboolean
authorized (const char *request, gsize len, const char *token)
{
  g_autofree gchar *text = g_strndup (request, len);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  gsize token_len = strlen (token);

  for (guint i = 1; lines[i] && lines[i][0] != '\r' && lines[i][0]; i++)
    {
      char *value = strchr (lines[i], ':');
      guchar diff = 0;

      if (value == NULL)
        continue;
      *value++ = '\0';
      if (g_ascii_strcasecmp (g_strstrip (lines[i]), "Authorization") != 0)
        continue;
      value = g_strstrip (value);
      if (g_ascii_strncasecmp (value, "Bearer ", 7) != 0)
        return FALSE;
      value = g_strchug (value + 7);
      if (strlen (value) != token_len)
        return FALSE;
      for (gsize c = 0; c < token_len; c++)
        diff |= (guchar) (value[c] ^ token[c]);
      return diff == 0;
    }
  return FALSE;
}

GBytes *
kstaled_metrics_respond (const char *request, gsize len, const char *token,
                         KstaledMetricsFunc func, gpointer user_data)
{
  const char *eol = memchr (request, '\n', len);
  g_autofree gchar *line = NULL;
  g_auto (GStrv) words = NULL;
  g_autofree gchar *body = NULL;
  gboolean head;

  if (eol == NULL)
    return response ("400 Bad Request", "bad request\n");
  line = g_strndup (request, (gsize) (eol - request));
  g_strchomp (line);
  words = g_strsplit (line, " ", 4);
  if (g_strv_length (words) != 3 || !g_str_has_prefix (words[2], "HTTP/1."))
    return response ("400 Bad Request", "bad request\n");
  head = g_str_equal (words[0], "HEAD");
  if (!head && !g_str_equal (words[0], "GET"))
    return response_full ("405 Method Not Allowed", "Allow: GET, HEAD\r\n",
                          "text/plain", "only GET and HEAD are served\n",
                          TRUE);
  if (!g_str_equal (words[1], "/metrics"))
    return response_full ("404 Not Found", "", "text/plain",
                          "metrics are at /metrics\n", !head);
  if (token != NULL && !authorized (request, len, token))
    return response_full ("401 Unauthorized",
                          "WWW-Authenticate: Bearer realm=\"kstaled-agent\"\r\n",
                          "text/plain", "a bearer token is needed\n", !head);
  body = func (user_data);
  return response_full ("200 OK", "",
                        "text/plain; version=0.0.4; charset=utf-8", body,
                        !head);
}

static void
client_free (Client *client)
{
  g_source_destroy (client->deadline);
  g_source_unref (client->deadline);
  g_io_stream_close (G_IO_STREAM (client->conn), NULL, NULL);
  g_object_unref (client->conn);
  g_object_unref (client->cancellable);
  g_clear_pointer (&client->response, g_bytes_unref);
  g_queue_unlink (&client->server->clients, &client->link);
  g_free (client);
}

/* The pending read or write then completes, cancelled, and frees the
 * client. */
static gboolean
deadline_passed (gpointer data)
{
  Client *client = data;

  g_debug ("metrics: a client took longer than %u ms, closing it",
           KSTALED_METRICS_DEADLINE_MS);
  g_cancellable_cancel (client->cancellable);
  return G_SOURCE_REMOVE;
}

static void
written (GObject *stream, GAsyncResult *result, gpointer data)
{
  Client *client = data;
  g_autoptr (GError) error = NULL;

  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (stream), result,
                                         NULL, &error) &&
      !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_debug ("metrics: writing the response failed: %s", error->message);
  client_free (client);
}

static void read_more (Client *client);

static gboolean
request_complete (const Client *client)
{
  return g_strstr_len (client->request, (gssize) client->len, "\r\n\r\n") ||
         g_strstr_len (client->request, (gssize) client->len, "\n\n");
}

static void
got_data (GObject *stream, GAsyncResult *result, gpointer data)
{
  Client *client = data;
  g_autoptr (GError) error = NULL;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (stream), result,
                                         &error);
  GOutputStream *out;

  if (n <= 0)
    {
      if (n < 0 && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug ("metrics: reading the request failed: %s", error->message);
      client_free (client);
      return;
    }
  client->len += (gsize) n;
  if (!request_complete (client))
    {
      if (client->len < sizeof client->request)
        {
          read_more (client);
          return;
        }
      client->response = response ("431 Request Header Fields Too Large",
                                   "request too large\n");
    }
  else
    client->response = kstaled_metrics_respond (client->request, client->len,
                                                client->server->token,
                                                client->server->func,
                                                client->server->user_data);
  out = g_io_stream_get_output_stream (G_IO_STREAM (client->conn));
  g_output_stream_write_all_async (out, g_bytes_get_data (client->response,
                                                          NULL),
                                   g_bytes_get_size (client->response),
                                   G_PRIORITY_DEFAULT, client->cancellable,
                                   written, client);
}

static void
read_more (Client *client)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (client->conn));

  g_input_stream_read_async (in, client->request + client->len,
                             sizeof client->request - client->len,
                             G_PRIORITY_DEFAULT, client->cancellable,
                             got_data, client);
}

static gboolean
incoming (GSocketService *service, GSocketConnection *conn, GObject *source,
          gpointer data)
{
  KstaledMetricsServer *server = data;
  Client *client;

  (void) service;
  (void) source;
  if (server->clients.length >= KSTALED_METRICS_MAX_CLIENTS)
    {
      g_debug ("metrics: %u clients already, dropping a connection",
               server->clients.length);
      return FALSE;             /* unreferenced and so closed by GIO */
    }
  client = g_new0 (Client, 1);
  client->server = server;
  client->conn = g_object_ref (conn);
  client->cancellable = g_cancellable_new ();
  client->link.data = client;
  g_queue_push_tail_link (&server->clients, &client->link);
  /* A deadline, not an idle timeout: a client that trickles its request or
   * reads the response a byte at a time still loses its slot. */
  client->deadline = g_timeout_source_new (KSTALED_METRICS_DEADLINE_MS);
  g_source_set_callback (client->deadline, deadline_passed, client, NULL);
  g_source_attach (client->deadline, server->context);
  read_more (client);
  return TRUE;
}

KstaledMetricsServer *
kstaled_metrics_server_new (const char *address, guint16 port,
                            const char *token_file, KstaledMetricsFunc func,
                            gpointer user_data, GError **error)
{
  g_autoptr (GInetAddress) inet = g_inet_address_new_from_string (address);
  g_autoptr (GSocketAddress) socket_address = NULL;
  g_autoptr (GSocketAddress) bound = NULL;
  g_autofree gchar *token = NULL;
  KstaledMetricsServer *server;

  if (inet == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "metrics endpoint: \"%s\" is not an IP address", address);
      return NULL;
    }
  if (token_file != NULL && token_file[0] != '\0')
    {
      if (!g_file_get_contents (token_file, &token, NULL, error))
        {
          g_prefix_error (error, "metrics token: ");
          return NULL;
        }
      g_strstrip (token);
      if (strlen (token) < KSTALED_METRICS_MIN_TOKEN_LEN ||
          strpbrk (token, " \t\r\n") != NULL)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       "metrics token: %s must hold one word of at least %d "
                       "characters", token_file,
                       KSTALED_METRICS_MIN_TOKEN_LEN);
          return NULL;
        }
    }
  socket_address = g_inet_socket_address_new (inet, port);
  server = g_new0 (KstaledMetricsServer, 1);
  server->token = g_steal_pointer (&token);
  server->service = g_socket_service_new ();
  server->func = func;
  server->user_data = user_data;
  g_queue_init (&server->clients);
  server->context = g_main_context_ref_thread_default ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (server->service),
                                      socket_address, G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, &bound,
                                      error))
    {
      g_prefix_error (error, "metrics endpoint %s port %u: ", address, port);
      kstaled_metrics_server_free (server);
      return NULL;
    }
  server->port =
    g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  server->url = g_strdup_printf (
    g_inet_address_get_family (inet) == G_SOCKET_FAMILY_IPV6
    ? "http://[%s]:%u/metrics" : "http://%s:%u/metrics", address,
    server->port);
  if (server->token == NULL)
    g_message ("metrics: no metrics-token-file, so every local user%s may "
               "read %s", g_inet_address_get_is_loopback (inet)
               ? "" : " and every host that reaches it", server->url);
  g_signal_connect (server->service, "incoming", G_CALLBACK (incoming),
                    server);
  g_socket_service_start (server->service);
  return server;
}

guint16
kstaled_metrics_server_get_port (KstaledMetricsServer *server)
{
  return server->port;
}

const char *
kstaled_metrics_server_get_url (KstaledMetricsServer *server)
{
  return server->url;
}

void
kstaled_metrics_server_free (KstaledMetricsServer *server)
{
  if (server == NULL)
    return;
  g_socket_service_stop (server->service);
  g_socket_listener_close (G_SOCKET_LISTENER (server->service));
  g_signal_handlers_disconnect_by_data (server->service, server);
  g_object_unref (server->service);
  for (GList *l = server->clients.head; l; l = l->next)
    g_cancellable_cancel (((Client *) l->data)->cancellable);
  /* Cancelled clients complete later and point at the server. */
  while (server->clients.length > 0)
    g_main_context_iteration (server->context, TRUE);
  g_main_context_unref (server->context);
  g_free (server->url);
  g_free (server->token);
  g_free (server);
}
