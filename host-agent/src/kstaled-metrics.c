#define G_LOG_DOMAIN "kstaled-agent"

#include "kstaled-metrics.h"

#include <gio/gio.h>
#include <string.h>

struct _KstaledMetricsServer {
  GSocketService *service;
  guint16 port;
  KstaledMetricsFunc func;
  gpointer user_data;
  guint n_clients;
  GCancellable *cancellable;    /* cancels every client on free */
  GMainContext *context;        /* where the clients' I/O completes */
};

typedef struct {
  KstaledMetricsServer *server;
  GSocketConnection *conn;
  gchar request[KSTALED_METRICS_MAX_REQUEST_LEN];
  gsize len;
  GBytes *response;
} Client;

static GBytes *
response (const char *status, const char *content_type, const char *body)
{
  gchar *text = g_strdup_printf ("HTTP/1.0 %s\r\n"
                                 "Content-Type: %s\r\n"
                                 "Content-Length: %" G_GSIZE_FORMAT "\r\n"
                                 "Connection: close\r\n\r\n%s",
                                 status, content_type, strlen (body), body);

  return g_bytes_new_take (text, strlen (text));
}

GBytes *
kstaled_metrics_respond (const char *request, gsize len,
                         KstaledMetricsFunc func, gpointer user_data)
{
  const char *eol = memchr (request, '\n', len);
  g_autofree gchar *line = NULL;
  g_auto (GStrv) words = NULL;
  g_autofree gchar *body = NULL;

  if (eol == NULL)
    return response ("400 Bad Request", "text/plain", "bad request\n");
  line = g_strndup (request, (gsize) (eol - request));
  g_strchomp (line);
  words = g_strsplit (line, " ", 4);
  if (g_strv_length (words) != 3 || !g_str_has_prefix (words[2], "HTTP/1."))
    return response ("400 Bad Request", "text/plain", "bad request\n");
  if (!g_str_equal (words[0], "GET"))
    return response ("405 Method Not Allowed", "text/plain",
                     "only GET is served\n");
  if (!g_str_equal (words[1], "/metrics"))
    return response ("404 Not Found", "text/plain",
                     "metrics are at /metrics\n");
  body = func (user_data);
  return response ("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                   body);
}

static void
client_free (Client *client)
{
  g_io_stream_close (G_IO_STREAM (client->conn), NULL, NULL);
  g_object_unref (client->conn);
  g_clear_pointer (&client->response, g_bytes_unref);
  client->server->n_clients--;
  g_free (client);
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
                                   "text/plain", "request too large\n");
    }
  else
    client->response = kstaled_metrics_respond (client->request, client->len,
                                                client->server->func,
                                                client->server->user_data);
  out = g_io_stream_get_output_stream (G_IO_STREAM (client->conn));
  g_output_stream_write_all_async (out, g_bytes_get_data (client->response,
                                                          NULL),
                                   g_bytes_get_size (client->response),
                                   G_PRIORITY_DEFAULT,
                                   client->server->cancellable, written,
                                   client);
}

static void
read_more (Client *client)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (client->conn));

  g_input_stream_read_async (in, client->request + client->len,
                             sizeof client->request - client->len,
                             G_PRIORITY_DEFAULT, client->server->cancellable,
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
  if (server->n_clients >= KSTALED_METRICS_MAX_CLIENTS)
    {
      g_debug ("metrics: %u clients already, dropping a connection",
               server->n_clients);
      return FALSE;             /* unreferenced and so closed by GIO */
    }
  /* The timeout applies to the asynchronous reads and writes too, so a
   * client that sends nothing cannot hold a slot. */
  g_socket_set_timeout (g_socket_connection_get_socket (conn),
                        KSTALED_METRICS_TIMEOUT_S);
  client = g_new0 (Client, 1);
  client->server = server;
  client->conn = g_object_ref (conn);
  server->n_clients++;
  read_more (client);
  return TRUE;
}

KstaledMetricsServer *
kstaled_metrics_server_new (guint16 port, KstaledMetricsFunc func,
                            gpointer user_data, GError **error)
{
  g_autoptr (GInetAddress) loopback =
    g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) address = g_inet_socket_address_new (loopback,
                                                                 port);
  g_autoptr (GSocketAddress) bound = NULL;
  KstaledMetricsServer *server = g_new0 (KstaledMetricsServer, 1);

  server->service = g_socket_service_new ();
  server->func = func;
  server->user_data = user_data;
  server->cancellable = g_cancellable_new ();
  server->context = g_main_context_ref_thread_default ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (server->service),
                                      address, G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, &bound,
                                      error))
    {
      g_prefix_error (error, "metrics endpoint 127.0.0.1:%u: ", port);
      kstaled_metrics_server_free (server);
      return NULL;
    }
  server->port =
    g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
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

void
kstaled_metrics_server_free (KstaledMetricsServer *server)
{
  if (server == NULL)
    return;
  g_socket_service_stop (server->service);
  g_socket_listener_close (G_SOCKET_LISTENER (server->service));
  g_signal_handlers_disconnect_by_data (server->service, server);
  g_object_unref (server->service);
  g_cancellable_cancel (server->cancellable);
  /* Cancelled clients complete later and point at the server. */
  while (server->n_clients > 0)
    g_main_context_iteration (server->context, TRUE);
  g_object_unref (server->cancellable);
  g_main_context_unref (server->context);
  g_free (server);
}
