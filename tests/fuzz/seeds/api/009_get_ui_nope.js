GET /ui/nope.js
Authorization: Bearer $READ

