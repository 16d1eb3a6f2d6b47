GET /ui/app.js
Authorization: Bearer $READ

