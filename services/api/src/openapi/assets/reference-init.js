/* global window, document, SwaggerUIBundle */
// Starts Swagger UI on the API reference page. A file of its own, not an inline script, so the
// page's Content-Security-Policy can allow scripts from this origin only.
(function () {
  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({
    url: root.getAttribute('data-openapi-url'),
    dom_id: '#swagger-ui',
    deepLinking: true,
    // The validator badge would send the document to a third party; the page talks to this API only.
    validatorUrl: null,
    tryItOutEnabled: false,
    persistAuthorization: false,
    displayRequestDuration: true,
    // Shows each operation's x-auth (public, token, callback) and what its schema could not express.
    showExtensions: true,
    filter: true,
    // Tags start closed: a page rendering every operation at once stalls past about 120 of them.
    docExpansion: 'none',
  });
})();
